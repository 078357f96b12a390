// The TokenRateLimitPolicy controller against a real kube-apiserver: the ai-gateway example's
// policies are Accepted and Enforced, each path's EffectivePolicy shows the merged token limits, the
// Limitador token limits ConfigMap lands in Limitador's namespace (and its limits are what
// limitador-operator's CRD keeps), a policy whose CEL costs too much is refused without touching the
// others, and the steady state writes nothing.
import { resolve } from 'node:path';
import { effectivePolicyCrd, type PolicyController, policyCrd } from '@cascade/core';
import { createNamespace, createObjects, readObjects, startController } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, waitFor } from '@cascade/envtest';
import { limitadorCrd } from '@cascade/ratelimitpolicy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { tokenRateLimitPolicyKind } from './kind.ts';

const EXAMPLES = resolve(import.meta.dirname, '../../../examples/ai-gateway');
const TRLP = '/apis/cascade.dev/v1alpha1/namespaces/llm/tokenratelimitpolicies';
type Cond = { type: string; status: string; reason: string; message: string };
type Limit = {
  namespace: string;
  max_value: number;
  seconds: number;
  conditions: string[];
  variables: string[];
  name: string;
};

describe.skipIf(!apiServerTestsEnabled())('TokenRateLimitPolicy controller against kube-apiserver', () => {
  let env: Envtest;
  let controller: PolicyController;
  const conditions = async (path: string) =>
    ((await env.call('GET', path)).body as { status?: { conditions?: Cond[] } }).status?.conditions ?? [];
  const cond = async (path: string, type: string) => (await conditions(path)).find((c) => c.type === type);

  beforeAll(async () => {
    env = await Envtest.start({
      crdObjects: [effectivePolicyCrd, policyCrd(tokenRateLimitPolicyKind), limitadorCrd],
    });
    await createNamespace(env, 'kuadrant-system');
    await createObjects(
      env,
      readObjects(EXAMPLES).filter((o) => (o as { kind: string }).kind !== 'AuthPolicy'),
    );
    controller = await startController(env, tokenRateLimitPolicyKind, {
      settings: { limitadorNamespace: 'kuadrant-system' },
    });
  }, 120_000);
  afterAll(async () => {
    await controller?.stop().catch(() => {});
    await env?.stop();
  });

  it('Accepted and Enforced; the EffectivePolicy of the completions rule merges the gateway default', async () => {
    for (const p of [
      `${TRLP}/plans`,
      '/apis/cascade.dev/v1alpha1/namespaces/ai-infra/tokenratelimitpolicies/daily-tokens',
    ])
      await waitFor(`${p} Enforced`, async () =>
        (await cond(p, 'Enforced'))?.status === 'True' ? true : undefined,
      );
    expect(await cond(`${TRLP}/plans`, 'Accepted')).toMatchObject({ status: 'True', reason: 'Accepted' });
    type Ep = {
      spec: {
        policyKind: string;
        targetRef: { kind: string; name: string };
        paths: { paths: { rule: string }[]; rules: Record<string, { source: { name: string } }> }[];
      };
    };
    const ep = await waitFor('the route EffectivePolicy', async () => {
      const r = (await env.call('GET', '/apis/cascade.dev/v1alpha1/namespaces/llm/effectivepolicies'))
        .body as {
        items: Ep[];
      };
      return r.items.find(
        (e) =>
          e.spec.policyKind === 'TokenRateLimitPolicy' &&
          e.spec.targetRef.kind === 'HTTPRoute' &&
          e.spec.paths.length === 2,
      );
    });
    const completions = ep.spec.paths.find((p) => p.paths[0]!.rule === 'completions')!;
    expect(Object.keys(completions.rules).sort()).toEqual([
      'limits.free',
      'limits.gold',
      'limits.per-user-daily',
    ]);
    expect(Object.keys(ep.spec.paths.find((p) => p.paths[0]!.rule === 'models')!.rules)).toEqual([
      'limits.per-user-daily',
    ]);
    expect(completions.rules['limits.per-user-daily']!.source.name).toBe('daily-tokens');
  });

  it('the token limits ConfigMap in Limitador namespace, whose limits limitador-operator keeps as they are', async () => {
    const cm = await waitFor('ConfigMap', async () => {
      const r = (await env.call('GET', '/api/v1/namespaces/kuadrant-system/configmaps')).body as {
        items: { metadata: { name: string; labels: Record<string, string> }; data: Record<string, string> }[];
      };
      return r.items.find((c) => c.metadata.name.startsWith('limitador-token-limits-'));
    });
    expect(cm.metadata.labels['cascade.dev/policy-kind']).toBe('TokenRateLimitPolicy');
    const limits = parse(cm.data['limits.yaml']!) as Limit[];
    expect(limits.map((l) => [l.namespace, l.max_value, l.seconds]).sort()).toEqual([
      ['llm/chat', 10000, 3600],
      ['llm/chat', 100000, 3600],
      // the gateway default counts per route: once for each rule's path, one limit per route
      ['llm/chat', 200000, 86400],
    ]);
    for (const l of limits) expect(l.conditions[0]).toMatch(/^descriptors\[0\]\["tokenlimit\./);
    // limitador-operator's CRD (structural copy, pruning like the real one) keeps them unchanged
    const put = await env.call(
      'POST',
      '/apis/limitador.kuadrant.io/v1alpha1/namespaces/kuadrant-system/limitadors',
      {
        apiVersion: 'limitador.kuadrant.io/v1alpha1',
        kind: 'Limitador',
        metadata: { name: 'limitador' },
        spec: { limits },
      },
    );
    expect(put.status).toBe(201);
    expect((put.body as { spec: { limits: Limit[] } }).spec.limits).toEqual(limits);
  });

  it('a policy whose CEL would cost too much is refused; the others stay Enforced', async () => {
    let body = 'true';
    for (let i = 9; i >= 0; i--) body = `[0,1,2,3,4,5,6,7,8,9].all(x${i}, ${body})`;
    const r = await env.call('POST', TRLP, {
      apiVersion: 'cascade.dev/v1alpha1',
      kind: 'TokenRateLimitPolicy',
      metadata: { name: 'costly', namespace: 'llm' },
      spec: {
        targetRef: { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'chat' },
        limits: { x: { rates: [{ limit: 1, window: '1m' }], when: [{ predicate: body }] } },
      },
    });
    expect(r.status).toBe(201);
    const refused = await waitFor('costly refused', async () => {
      const c = await cond(`${TRLP}/costly`, 'Accepted');
      return c?.status === 'False' ? c : undefined;
    });
    expect(refused.reason).toBe('Invalid');
    expect(refused.message).toMatch(/exceeds the limit of 1000000/);
    expect((await cond(`${TRLP}/plans`, 'Enforced'))?.status).toBe('True');
  });

  it('steady state: no writes', async () => {
    await controller.idle();
    await new Promise((r) => setTimeout(r, 500));
    const before = controller.writes.get();
    await new Promise((r) => setTimeout(r, 2000));
    expect(controller.writes.get()).toBe(before);
  });
});
