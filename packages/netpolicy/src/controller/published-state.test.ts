// PublishedState: what the netpolicy-controller publishes, recomputed only when its inputs move.
// Pod churn inside existing identities recomputes nothing; the exact analysis waits for its interval
// on pod churn and runs at once on a policy change; whatever it skipped, the result equals a fresh
// computation.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { NetpolEngine } from '../engine/engine.ts';
import type { NetPolicyObject } from '../engine/model.ts';
import { clusterArb, shopCluster, shopPod } from '../engine/testing.ts';
import { networkEffectives } from './published.ts';
import { networkPolicyConditions } from './published-conditions.ts';
import { PublishedState } from './published-state.ts';

const pod = shopPod;

// An admin rule denies shop's ingress from dev; a NetworkPolicy allows shop's cart from dev: dead
// as soon as dev has a pod (every connection it allows is decided by the admin rule first).
const ANP: NetPolicyObject = {
  kind: 'AdminNetworkPolicy',
  name: 'dev-never-reaches-shop',
  spec: {
    priority: 10,
    subject: { namespaces: { matchLabels: { team: 'shop' } } },
    ingress: [{ name: 'deny-dev', action: 'Deny', from: [{ namespaces: { matchLabels: { env: 'dev' } } }] }],
  },
};
const NP: NetPolicyObject = {
  kind: 'NetworkPolicy',
  namespace: 'shop',
  name: 'cart-from-dev',
  spec: {
    podSelector: { matchLabels: { app: 'cart' } },
    policyTypes: ['Ingress'],
    ingress: [{ from: [{ namespaceSelector: { matchLabels: { env: 'dev' } } }] }],
  },
};

function setup() {
  const c = shopCluster(
    [ANP, NP],
    [pod('shop', 'web-1', { app: 'web' }, '10.0.0.1'), pod('shop', 'cart', { app: 'cart' }, '10.0.0.3')],
  );
  const engine = NetpolEngine.fromCluster(c);
  let now = 1_000_000;
  const state = new PublishedState({ analysisIntervalMs: 30_000, now: () => now });
  return { engine, state, tick: (ms: number) => (now += ms) };
}

const npCondition = (s: PublishedState) =>
  s.conditions.get('NetworkPolicy/shop/cart-from-dev')!.find((c) => c.type === 'RulesEffective')!;

describe('PublishedState', () => {
  it('recomputes nothing for pod churn inside an existing identity', () => {
    const { engine, state } = setup();
    const first = state.update(engine);
    expect(first.effectives).toBe(true);
    expect(first.conditions).toBe(true);
    const before = state.effectives;
    engine.upsertPod(pod('shop', 'web-2', { app: 'web' }, '10.0.0.2'));
    engine.flush();
    const u = state.update(engine);
    expect(u.effectives).toBe(false);
    expect(u.conditions).toBe(false);
    expect(u.ms.effectives + u.ms.structure + u.ms.conditions).toBe(0);
    expect(state.effectives).toBe(before);
    // the exact analysis is put off, not dropped
    expect(u.analysisDueInMs).toBe(30_000);
  });

  it('recomputes the EffectivePolicies for a new label set', () => {
    const { engine, state } = setup();
    state.update(engine);
    engine.upsertPod(pod('shop', 'api', { app: 'api' }, '10.0.0.9'));
    engine.flush();
    const u = state.update(engine);
    expect(u.effectives).toBe(true);
    expect([...state.effectives.values()].map((e) => e.labels.app).sort()).toEqual(['api', 'cart', 'web']);
    // only its own object is built and compared; the others are left as they were
    const api = [...state.effectives].find(([, e]) => e.labels.app === 'api')![0];
    expect(u.changed).toEqual([api]);
    // its last pod gone: its object goes, nothing else
    engine.removePod('shop', 'api');
    engine.flush();
    const gone = state.update(engine);
    expect(gone.changed).toEqual([api]);
    expect(state.effectives.has(api)).toBe(false);
  });

  it('runs the exact analysis after its interval on pod churn, at once on a policy change', () => {
    const { engine, state, tick } = setup();
    state.update(engine);
    expect(npCondition(state).status).toBe('True'); // no dev pod: nothing to decide, not dead
    engine.upsertPod(pod('dev', 'toy', { app: 'toy' }, '10.0.0.4'));
    engine.flush();
    tick(10_000);
    const early = state.update(engine);
    expect(early.analysisDueInMs).toBe(20_000);
    expect(npCondition(state).status).toBe('True'); // stale until the interval is over
    tick(20_000);
    const due = state.update(engine);
    expect(due.analysisDueInMs).toBeUndefined();
    expect(due.conditions).toBe(true);
    expect(npCondition(state)).toMatchObject({ status: 'False', reason: 'DeadRules' });
    // no counts in the condition: another dev pod changes nothing
    expect(npCondition(state).message).not.toMatch(/\d+ connection/);
    engine.upsertPod(pod('dev', 'toy-2', { app: 'toy' }, '10.0.0.5'));
    engine.flush();
    tick(60_000);
    expect(state.update(engine).conditions).toBe(false);
    // a policy change: analysed at once, no waiting
    engine.removePolicy('AdminNetworkPolicy/dev-never-reaches-shop');
    engine.flush();
    const u = state.update(engine);
    expect(u.analysisDueInMs).toBeUndefined();
    expect(npCondition(state).status).toBe('True');
  });

  it('a NetworkPolicy change rebuilds and analyses only its namespace; an ANP change, what its subject selects', () => {
    const { engine, state, tick } = setup();
    engine.upsertPod(pod('dev', 'toy', { app: 'toy' }, '10.0.0.4'));
    engine.flush();
    state.update(engine);
    expect(npCondition(state)).toMatchObject({ status: 'False', reason: 'DeadRules' });
    const shop = [...state.effectives].filter(([, e]) => e.namespace === 'shop');
    const dev = [...state.effectives].find(([, e]) => e.namespace === 'dev')!;
    // a NetworkPolicy in dev: only dev's object is rebuilt; shop's dead rule is still reported
    tick(1_000);
    engine.upsertPolicy({
      ...NP,
      namespace: 'dev',
      name: 'toys',
      spec: { podSelector: {}, policyTypes: ['Egress'] },
    });
    engine.flush();
    const u = state.update(engine);
    expect(u.changed).toEqual([dev[0]]);
    expect(state.effectives.get(dev[0])!.egress.map((r) => r.rule)).toEqual(['egress isolation']);
    for (const [k, e] of shop) expect(state.effectives.get(k)).toBe(e); // not rebuilt
    expect(u.analysisDueInMs).toBeUndefined();
    expect(npCondition(state)).toMatchObject({ status: 'False', reason: 'DeadRules' });
    // the tenant lets cart in from everywhere: shop's objects are rebuilt, the rule is live at once
    // (shop's own pods reach cart), dev's object is left as it is
    tick(1_000);
    const devNow = state.effectives.get(dev[0]);
    engine.upsertPolicy({ ...NP, spec: { ...(NP.spec as object), ingress: [{}] } });
    engine.flush();
    const v = state.update(engine);
    expect(v.changed?.sort()).toEqual(shop.map(([k]) => k).sort());
    expect(state.effectives.get(dev[0])).toBe(devNow);
    expect(v.analysisDueInMs).toBeUndefined();
    expect(npCondition(state).status).toBe('True');
    // an admin policy change rebuilds the objects its subject selects (shop's), not dev's
    const devBefore = state.effectives.get(dev[0]);
    engine.removePolicy('AdminNetworkPolicy/dev-never-reaches-shop');
    engine.flush();
    const w = state.update(engine);
    expect(w.changed?.sort()).toEqual(shop.map(([k]) => k).sort());
    expect(state.effectives.get(dev[0])).toBe(devBefore);
    for (const [k] of shop)
      expect(state.effectives.get(k)!.ingress.some((r) => r.tier === 'admin')).toBe(false);
  });

  it('equals a fresh computation after any changes (analysis due)', () => {
    fc.assert(
      fc.property(
        clusterArb,
        fc.array(
          fc.record({
            pod: fc.nat(20),
            op: fc.constantFrom(
              'twin',
              'relabel',
              'remove',
              'dropPolicy',
              'nsLabel',
              'editPolicy',
              'copyPolicy',
              'restorePolicy',
            ),
          }),
          { maxLength: 6 },
        ),
        (c, changes) => {
          const engine = NetpolEngine.fromCluster(c);
          let now = 0;
          const state = new PublishedState({ analysisIntervalMs: 1_000, now: () => now });
          state.update(engine);
          changes.forEach((ch, i) => {
            const p = c.pods[ch.pod % Math.max(1, c.pods.length)];
            if (ch.op === 'nsLabel') {
              const ns = c.namespaces[ch.pod % c.namespaces.length]!;
              engine.upsertNamespace({ ...ns, labels: { ...ns.labels, env: `e${i % 2}` } });
            } else if (ch.op === 'dropPolicy' && c.policies.length) {
              const x = c.policies[ch.pod % c.policies.length]!;
              engine.removePolicy(x.namespace ? `${x.kind}/${x.namespace}/${x.name}` : `${x.kind}/${x.name}`);
            } else if (ch.op === 'editPolicy' && c.policies.length) {
              // one rule fewer, or (none left) every pod of the namespace selected
              const x = c.policies[ch.pod % c.policies.length]!;
              const spec = x.spec as { ingress?: unknown[]; podSelector?: unknown };
              engine.upsertPolicy({
                ...x,
                spec: spec.ingress?.length
                  ? { ...spec, ingress: spec.ingress.slice(1) }
                  : { ...spec, ...(x.kind === 'NetworkPolicy' ? { podSelector: {} } : {}) },
              } as NetPolicyObject);
            } else if (ch.op === 'copyPolicy' && c.policies.length) {
              const x = c.policies[ch.pod % c.policies.length]!;
              const ns = c.namespaces[i % c.namespaces.length]!.name;
              engine.upsertPolicy({
                ...x,
                name: `${x.name}-c${i}`,
                ...(x.namespace ? { namespace: ns } : {}),
              });
            } else if (ch.op === 'restorePolicy' && c.policies.length) {
              engine.upsertPolicy(c.policies[ch.pod % c.policies.length]!);
            } else if (p && ch.op === 'twin')
              engine.upsertPod({ ...p, name: `${p.name}-t${i}`, ips: [`10.9.${i}.1`] });
            else if (p && ch.op === 'relabel') engine.upsertPod({ ...p, labels: { ...p.labels, v: `${i}` } });
            else if (p && ch.op === 'remove') engine.removePod(p.namespace, p.name);
            engine.flush();
            now += 500; // half the interval: some updates skip the analysis
            state.update(engine);
          });
          now += 1_000;
          state.update(engine);
          const fresh = new Map(networkEffectives(engine).map((e) => [`${e.namespace}/${e.name}`, e]));
          expect(state.effectives).toEqual(fresh);
          expect(state.conditions).toEqual(networkPolicyConditions(engine));
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('PublishedState, tenant and admin edits around a dead rule', () => {
  // the shop story with random edits: dev pods come and go (the NetworkPolicy rule is dead exactly
  // while dev has a pod and the admin rule is there), tenants edit NetworkPolicies in shop and dev,
  // the admin removes and restores the admin rule; the analysis is often put off in between
  const ops = ['devPod', 'noDevPod', 'liveNP', 'deadNP', 'devNP', 'noDevNP', 'noANP', 'ANP', 'wait'] as const;
  it('equals a fresh computation, whatever was analysed for one namespace only', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...ops), { maxLength: 10 }), (steps) => {
        const { engine, state, tick } = setup();
        state.update(engine);
        steps.forEach((op, i) => {
          if (op === 'devPod') engine.upsertPod(pod('dev', `toy-${i}`, { app: 'toy' }, `10.0.1.${i + 1}`));
          else if (op === 'noDevPod')
            for (const p of [...engine.pods.values()])
              if (p.namespace === 'dev') engine.removePod(p.namespace, p.name);
          if (op === 'liveNP')
            engine.upsertPolicy({ ...NP, spec: { ...(NP.spec as object), ingress: [{}] } });
          if (op === 'deadNP') engine.upsertPolicy(NP);
          if (op === 'devNP')
            engine.upsertPolicy({
              ...NP,
              namespace: 'dev',
              name: `toys-${i % 2}`,
              spec: { podSelector: {} },
            });
          if (op === 'noDevNP') engine.removePolicy(`NetworkPolicy/dev/toys-${i % 2}`);
          if (op === 'noANP') engine.removePolicy('AdminNetworkPolicy/dev-never-reaches-shop');
          if (op === 'ANP') engine.upsertPolicy(ANP);
          engine.flush();
          tick(op === 'wait' ? 30_000 : 1_000);
          state.update(engine);
        });
        tick(30_000);
        state.update(engine);
        const fresh = new Map(networkEffectives(engine).map((e) => [`${e.namespace}/${e.name}`, e]));
        expect(state.effectives).toEqual(fresh);
        expect(state.conditions).toEqual(networkPolicyConditions(engine));
      }),
      { numRuns: 300 },
    );
  });
});
