// Enforced means enforced (issue 28 item 1), against a real kube-apiserver: with --require-ready, an
// AuthPolicy is Enforced only when its AuthConfigs' resource is served (else MissingDependency), each
// AuthConfig is reported ready by Authorino, which reporting nothing is not (else Pending), and the
// Gateway it reaches is Accepted and Programmed by its controller (else TargetNotProgrammed). Each
// step is taken here as the missing party would take it; a Warning Event marks the held-back states.
import { effectivePolicyCrd, type PolicyController, policyCrd } from '@cascade/core';
import { createGateway, createNamespace, createRoute, startController } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, waitFor } from '@cascade/envtest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authConfigCrd } from './authconfig-crd.ts';
import { authPolicyKind } from './kind.ts';

const AP = '/apis/cascade.dev/v1alpha1/namespaces/ready/authpolicies';
const AUTHCONFIGS = '/apis/authorino.kuadrant.io/v1beta3/namespaces/ready/authconfigs';
const GW = '/apis/gateway.networking.k8s.io/v1/namespaces/ready/gateways/gw';
type Cond = { type: string; status: string; reason: string; message: string };

describe.skipIf(!apiServerTestsEnabled())('--require-ready: Enforced only where something enforces', () => {
  let env: Envtest;
  let controller: PolicyController;

  beforeAll(async () => {
    env = await Envtest.start({ crdObjects: [effectivePolicyCrd, policyCrd(authPolicyKind)] });
    await createNamespace(env, 'ready');
    await createGateway(env, { namespace: 'ready' });
    await createRoute(env, { namespace: 'ready', name: 'r', rules: [{ name: 'main' }] });
    controller = await startController(env, authPolicyKind, { requireReady: true });
    const r = await env.call('POST', AP, {
      apiVersion: 'cascade.dev/v1alpha1',
      kind: 'AuthPolicy',
      metadata: { name: 'p', namespace: 'ready' },
      spec: {
        targetRef: { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'r' },
        rules: { authentication: { sso: { jwt: { issuerUrl: 'https://sso' } } } },
      },
    });
    expect(r.status).toBe(201);
  }, 120_000);
  afterAll(async () => {
    await controller?.stop().catch(() => {});
    await env?.stop();
  });

  const enforced = async () =>
    (
      (await env.call('GET', `${AP}/p`)).body as { status?: { conditions?: Cond[] } }
    ).status?.conditions?.find((c) => c.type === 'Enforced');
  const waitReason = (reason: string) =>
    waitFor(`Enforced ${reason}`, async () => {
      const e = await enforced();
      return e?.reason === reason ? e : undefined;
    });

  it('walks MissingDependency -> Pending -> TargetNotProgrammed -> Enforced as each party does its part', async () => {
    // no Authorino: its CRD is not served
    const missing = await waitReason('MissingDependency');
    expect(missing.status).toBe('False');
    expect(missing.message).toMatch(
      /^Policy is not enforced: cannot write AuthConfig ready\/\S+ \(authconfigs \(authorino\.kuadrant\.io\/v1beta3\) is not served: install its CRD\)$/,
    );
    // a policy that joins while the AuthConfig already waits (the same why) waits too: its merged
    // rule is in that AuthConfig. It was left out of the waiting object's policies and went on to the
    // gateway's reason (TargetNotProgrammed), a flake of the e2e when kubectl's objects came apart
    expect(
      (
        await env.call('POST', AP, {
          apiVersion: 'cascade.dev/v1alpha1',
          kind: 'AuthPolicy',
          metadata: { name: 'late', namespace: 'ready' },
          spec: {
            targetRef: { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'gw' },
            defaults: {
              strategy: 'merge',
              rules: { authorization: { team: { opa: { rego: 'allow = true' } } } },
            },
          },
        })
      ).status,
    ).toBe(201);
    const late = await waitFor('the late policy held back', async () => {
      const e = (
        (await env.call('GET', `${AP}/late`)).body as { status?: { conditions?: Cond[] } }
      ).status?.conditions?.find((c) => c.type === 'Enforced');
      return e?.status === 'False' ? e : undefined;
    });
    expect(late.reason).toBe('MissingDependency');
    expect(late.message).toBe(missing.message);
    // the CRD installed: the AuthConfig is written, and Authorino has said nothing of it
    expect(
      (await env.call('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', authConfigCrd))
        .status,
    ).toBe(201);
    const pending = await waitReason('Pending');
    expect(pending.message).toMatch(
      /waiting for AuthConfig ready\/\S+ \(its consumer has reported nothing on it yet\) to be ready/,
    );
    // Authorino reports it ready: the gateway is what is left (the CRD's own default: Pending)
    const ac = ((await env.call('GET', AUTHCONFIGS)).body as { items: Record<string, unknown>[] }).items[0]!;
    const meta = ac.metadata as { name: string };
    const put = await env.call('PUT', `${AUTHCONFIGS}/${meta.name}/status`, {
      ...ac,
      status: { summary: { ready: true, hostsReady: [] } },
    });
    expect(put.status).toBe(200);
    const target = await waitReason('TargetNotProgrammed');
    expect(target.message).toMatch(
      /^Policy is not enforced: gateway ready\/gw has not been programmed by any controller \(Programmed=Unknown Pending/,
    );
    // the gateway's controller accepts and programs it: Enforced, with no policy change
    const gw = (await env.call('GET', GW)).body as {
      metadata: { generation: number };
      status: { conditions: Cond[] };
    };
    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const mine = (type: string) => ({
      type,
      status: 'True',
      reason: type,
      message: 'programmed',
      observedGeneration: gw.metadata.generation,
      lastTransitionTime: now,
    });
    const conditions = gw.status.conditions.map((c) =>
      c.type === 'Accepted' || c.type === 'Programmed' ? mine(c.type) : c,
    );
    expect(
      (await env.call('PUT', `${GW}/status`, { ...gw, status: { ...gw.status, conditions } })).status,
    ).toBe(200);
    const ok = await waitReason('Enforced');
    expect(ok.status).toBe('True');
    const lateOk = (
      (await env.call('GET', `${AP}/late`)).body as { status?: { conditions?: Cond[] } }
    ).status?.conditions?.find((c) => c.type === 'Enforced');
    expect(lateOk?.reason).toBe('Enforced');
    // Warning Events for the states that are not a moment's delay (not Pending)
    const reasons = (
      (await env.call('GET', '/api/v1/namespaces/ready/events')).body as { items: { reason: string }[] }
    ).items.map((e) => e.reason);
    expect(reasons).toEqual(expect.arrayContaining(['MissingDependency', 'TargetNotProgrammed']));
    expect(reasons).not.toContain('Pending');
  }, 120_000);

  it('a gateway that stops being programmed takes Enforced back (a status-only change)', async () => {
    const gw = (await env.call('GET', GW)).body as { status: { conditions: Cond[] } };
    const conditions = gw.status.conditions.map((c) =>
      c.type === 'Programmed' ? { ...c, status: 'False', reason: 'Invalid', message: 'no address' } : c,
    );
    expect(
      (await env.call('PUT', `${GW}/status`, { ...gw, status: { ...gw.status, conditions } })).status,
    ).toBe(200);
    const back = await waitReason('TargetNotProgrammed');
    expect(back.message).toContain(
      'gateway ready/gw is not programmed (Programmed=False Invalid: no address)',
    );
    // the metric an alert reads (both policies)
    await waitFor('cascade_policies counts it', async () =>
      /cascade_policies\{kind="AuthPolicy",condition="Enforced",status="False",reason="TargetNotProgrammed"\} 2/.test(
        await controller.metrics.render(),
      )
        ? true
        : undefined,
    );
  }, 60_000);

  it("a policy waits on, and names, only the AuthConfigs that carry its rules (not another team's)", async () => {
    // the gateway programmed again (the test before took it back)
    const gw = (await env.call('GET', GW)).body as { status: { conditions: Cond[] } };
    const conditions = gw.status.conditions.map((c) =>
      c.type === 'Programmed' ? { ...c, status: 'True', reason: 'Programmed', message: 'programmed' } : c,
    );
    expect(
      (await env.call('PUT', `${GW}/status`, { ...gw, status: { ...gw.status, conditions } })).status,
    ).toBe(200);
    await waitReason('Enforced');
    await createRoute(env, { namespace: 'ready', name: 'r2', rules: [{ name: 'main' }] });
    expect(
      (
        await env.call('POST', AP, {
          apiVersion: 'cascade.dev/v1alpha1',
          kind: 'AuthPolicy',
          metadata: { name: 'p2', namespace: 'ready' },
          spec: {
            targetRef: { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'r2' },
            rules: { authentication: { other: { apiKey: { selector: { matchLabels: { team: 'b' } } } } } },
          },
        })
      ).status,
    ).toBe(201);
    // r2's AuthConfig written: Authorino reports it not ready
    const acOf = async (route: string) =>
      (
        (await env.call('GET', AUTHCONFIGS)).body as {
          items: { metadata: { name: string; annotations: Record<string, string> } }[];
        }
      ).items.find((a) => a.metadata.annotations['cascade.dev/route'] === `HTTPRoute/ready/${route}`);
    const r2 = await waitFor("r2's AuthConfig", () => acOf('r2'));
    const live = (await env.call('GET', `${AUTHCONFIGS}/${r2.metadata.name}`)).body as Record<
      string,
      unknown
    >;
    expect(
      (
        await env.call('PUT', `${AUTHCONFIGS}/${r2.metadata.name}/status`, {
          ...live,
          status: { summary: { ready: false, hostsReady: [] } },
        })
      ).status,
    ).toBe(200);
    // (Pending first says the consumer has reported nothing yet, until the controller sees the
    // status written above: wait for the report, not for the first Pending)
    const p2 = await waitFor('p2 held back by the report', async () => {
      const e = (
        (await env.call('GET', `${AP}/p2`)).body as { status?: { conditions?: Cond[] } }
      ).status?.conditions?.find((c) => c.type === 'Enforced');
      return e?.reason === 'Pending' && e.message.includes('reports it not ready') ? e : undefined;
    });
    expect(p2.message).toContain(`AuthConfig ready/${r2.metadata.name} (its consumer reports it not ready)`);
    // p's rules are not in r2's AuthConfig: it stays Enforced and never names it
    await new Promise((r) => setTimeout(r, 1500));
    const p = await enforced();
    expect(p?.reason).toBe('Enforced');
    expect(p?.message).not.toContain(r2.metadata.name);
    // the gateway's merged default is in every route's AuthConfig: it waits on r2's too
    const late = (
      (await env.call('GET', `${AP}/late`)).body as { status?: { conditions?: Cond[] } }
    ).status?.conditions?.find((c) => c.type === 'Enforced');
    expect(late?.reason).toBe('Pending');
    expect(late?.message).toContain(r2.metadata.name);
  }, 60_000);
});
