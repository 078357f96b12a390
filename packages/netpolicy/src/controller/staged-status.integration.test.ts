// Staged policies' status from the netpolicy-controller on kube-apiserver, running with exactly the
// chart's RBAC: Accepted True for what the standard kind accepts, False naming the field for what it
// would refuse and for a Delete of nothing (which turns True once the policy exists); a restart
// writes nothing. Also the condition itself, without an API server.
import { effectivePolicyCrd } from '@cascade/core';
import type { KubeClient } from '@cascade/core/kube';
import { createNamespace } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, waitFor } from '@cascade/envtest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { controllerClient, startNetpolController } from '../../test/fixtures.ts';
import { NODE_REPORT_PATH, netpolNodeReportCrd } from '../cluster/node-report.ts';
import { podAddressSliceCrd } from '../cluster/slices.ts';
import { stagedCrds } from '../cluster/staged-crds.ts';
import type { NetpolController } from './controller.ts';
import { stagedCondition } from './staged-status.ts';

const SNP = '/apis/cascade.dev/v1alpha1/namespaces/shop/stagednetworkpolicies';
const NP = '/apis/networking.k8s.io/v1/namespaces/shop/networkpolicies';
type Cond = { type: string; status: string; reason: string; message: string; lastTransitionTime: string };

describe('a staged policy condition', () => {
  const none = () => false;
  it('accepts what the standard kind accepts and names what it would refuse', () => {
    const ok = stagedCondition(
      'StagedNetworkPolicy',
      { metadata: { name: 'a', namespace: 's' }, spec: { podSelector: {} } },
      none,
    );
    expect(ok).toMatchObject({ status: 'True', reason: 'Staged' });
    expect(ok.message).toMatch(/^staged: a new NetworkPolicy s\/a; never enforced/);
    const bad = stagedCondition(
      'StagedNetworkPolicy',
      {
        metadata: { name: 'b', namespace: 's' },
        spec: { podSelector: {}, ingress: [{ from: [{ ipBlock: { cidr: '10.0.0.0/33' } }] }] },
      },
      none,
    );
    expect(bad).toMatchObject({ status: 'False', reason: 'Invalid' });
    expect(bad.message).toMatch(
      /^NetworkPolicy s\/b would be refused: spec\.ingress\[0\]\.from\[0\]\.ipBlock: "10\.0\.0\.0\/33" is not a valid CIDR/,
    );
    const action = stagedCondition(
      'StagedAdminNetworkPolicy',
      { metadata: { name: 'c' }, spec: { stagedAction: 'Later' } },
      none,
    );
    expect(action).toEqual({
      type: 'Accepted',
      status: 'False',
      reason: 'Invalid',
      message: 'spec.stagedAction: "Later" is not Set or Delete',
    });
    const del = (has: boolean) =>
      stagedCondition(
        'StagedClusterNetworkPolicy',
        { metadata: { name: 'd' }, spec: { stagedAction: 'Delete' } },
        () => has,
      );
    expect(del(false)).toMatchObject({
      status: 'False',
      reason: 'TargetNotFound',
      message: 'there is no ClusterNetworkPolicy d to delete',
    });
    expect(del(true)).toMatchObject({ status: 'True', reason: 'Staged' });
    // a message is bounded
    const long = stagedCondition(
      'StagedNetworkPolicy',
      {
        metadata: { name: 'e', namespace: 's' },
        spec: {
          podSelector: {},
          ingress: Array.from({ length: 200 }, () => ({ from: [{ ipBlock: { cidr: 'x' } }] })),
        },
      },
      none,
    );
    expect(long.message.length).toBeLessThanOrEqual(1024);
  });
});

describe.skipIf(!apiServerTestsEnabled())('staged policies: status from the netpolicy-controller', () => {
  let env: Envtest;
  let client: KubeClient;
  const controllers: NetpolController[] = [];
  const cond = async (name: string) =>
    ((await env.call('GET', `${SNP}/${name}`)).body as { status?: { conditions?: Cond[] } }).status
      ?.conditions?.[0];
  const stage = (name: string, spec: unknown) =>
    env.call('POST', SNP, {
      apiVersion: 'cascade.dev/v1alpha1',
      kind: 'StagedNetworkPolicy',
      metadata: { name },
      spec,
    });

  beforeAll(async () => {
    env = await Envtest.start({
      crdObjects: [effectivePolicyCrd, podAddressSliceCrd, netpolNodeReportCrd, ...stagedCrds()],
    });
    await createNamespace(env, 'shop', {});
    await stage('deny-all', { podSelector: {}, policyTypes: ['Ingress'] });
    await stage('bad-cidr', { podSelector: {}, ingress: [{ from: [{ ipBlock: { cidr: '10.0.0.0/33' } }] }] });
    await stage('drop-old', { stagedAction: 'Delete' });
    client = await controllerClient(env);
  }, 120_000);
  afterAll(async () => {
    for (const c of controllers) await c.stop().catch(() => {});
    await env?.stop();
  });

  it('says Accepted, or why not, on each staged policy; a Delete of nothing turns True once it exists', async () => {
    const c = await startNetpolController(client, { identity: 'a', leaseNamespace: 'cascade-system' });
    controllers.push(c);
    const ok = await waitFor('deny-all status', async () => (await cond('deny-all')) ?? undefined);
    expect(ok).toMatchObject({ type: 'Accepted', status: 'True', reason: 'Staged' });
    expect(await waitFor('bad-cidr status', async () => (await cond('bad-cidr')) ?? undefined)).toMatchObject(
      {
        status: 'False',
        reason: 'Invalid',
        message: expect.stringMatching(
          /would be refused: spec\.ingress\[0\]\.from\[0\]\.ipBlock: "10\.0\.0\.0\/33" is not a valid CIDR/,
        ),
      },
    );
    expect(await waitFor('drop-old status', async () => (await cond('drop-old')) ?? undefined)).toMatchObject(
      {
        status: 'False',
        reason: 'TargetNotFound',
        message: 'there is no NetworkPolicy shop/drop-old to delete',
      },
    );
    await env.call('POST', NP, {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'drop-old' },
      spec: { podSelector: {} },
    });
    await waitFor('drop-old accepted', async () =>
      (await cond('drop-old'))?.status === 'True' ? true : undefined,
    );
  });

  it("sums the nodes' staged-flow counts into status.flows, by rule; gone when the window empties", async () => {
    const report = async (node: string, flows: number) => {
      const live = (await env.call('GET', `${NODE_REPORT_PATH}/${node}`)).body as {
        metadata: { resourceVersion: string };
      };
      return env.call('PUT', `${NODE_REPORT_PATH}/${node}`, {
        apiVersion: 'cascade.dev/v1alpha1',
        kind: 'NetpolNodeReport',
        metadata: { name: node, resourceVersion: live.metadata.resourceVersion },
        spec: {
          findings: [],
          ...(flows
            ? {
                stagedFlows: [
                  {
                    staged: 'StagedNetworkPolicy/shop/deny-all',
                    direction: 'ingress',
                    verdict: 'deny',
                    rule: 'StagedNetworkPolicy/shop/deny-all',
                    flows,
                  },
                  {
                    staged: 'StagedNetworkPolicy/shop/deny-all',
                    direction: 'egress',
                    verdict: 'allow',
                    flows: 1,
                  },
                ],
              }
            : {}),
        },
      });
    };
    for (const node of ['n1', 'n2'])
      expect(
        (
          await env.call('POST', NODE_REPORT_PATH, {
            apiVersion: 'cascade.dev/v1alpha1',
            kind: 'NetpolNodeReport',
            metadata: { name: node },
            spec: { findings: [] },
          })
        ).status,
      ).toBe(201);
    expect((await report('n1', 3)).status).toBe(200);
    expect((await report('n2', 4)).status).toBe(200);
    const flowsOf = async () =>
      (
        (await env.call('GET', `${SNP}/deny-all`)).body as {
          status?: { flows?: { wouldDeny: number; wouldAllow: number; byRule: unknown[] } };
        }
      ).status?.flows;
    const f = await waitFor('status.flows', async () => {
      const x = await flowsOf();
      return x?.wouldDeny === 7 ? x : undefined;
    });
    expect(f).toEqual({
      windowSeconds: 600,
      wouldDeny: 7,
      wouldAllow: 2,
      byRule: [
        { direction: 'ingress', verdict: 'deny', rule: 'StagedNetworkPolicy/shop/deny-all', flows: 7 },
        { direction: 'egress', verdict: 'allow', rule: '(no rule: default)', flows: 2 },
      ],
    });
    // the other staged objects: no flows, no field
    expect(
      ((await env.call('GET', `${SNP}/drop-old`)).body as { status?: { flows?: unknown } }).status?.flows,
    ).toBeUndefined();
    expect((await report('n1', 0)).status).toBe(200);
    expect((await report('n2', 0)).status).toBe(200);
    await waitFor('status.flows gone', async () => ((await flowsOf()) === undefined ? true : undefined));
  });

  it('a restart writes nothing', async () => {
    const first = controllers[0]!;
    await new Promise((r) => setTimeout(r, 300));
    await first.idle();
    const before = await cond('deny-all');
    await first.stop();
    const c = await startNetpolController(client, { identity: 'b', leaseNamespace: 'cascade-system' });
    controllers.push(c);
    await waitFor('leader', async () => (c.leader ? true : undefined));
    await new Promise((r) => setTimeout(r, 500));
    await c.idle();
    expect(c.writes.get()).toBe(0);
    expect((await cond('deny-all'))?.lastTransitionTime).toBe(before?.lastTransitionTime);
  });
});
