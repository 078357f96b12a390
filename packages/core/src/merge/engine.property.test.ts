// Property tests of the D/O engine over random policies on the standard topology.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { policyConditions } from '../status/conditions.ts';
import { L, standardEngine, standardTopology, testLimitKind } from '../testing/index.ts';
import { objectKeysOfPath } from '../topology/topology.ts';
import { PolicyEngine } from './engine.ts';
import type { ChainResult } from './fold.ts';
import type { PolicyObject } from './policy.ts';

const TARGETS = [
  { ns: 'infra', ref: { kind: 'GatewayClass', name: 'gc' } },
  { ns: 'infra', ref: { kind: 'Gateway', name: 'gw' } },
  { ns: 'infra', ref: { kind: 'Gateway', name: 'gw2' } },
  { ns: 'infra', ref: { kind: 'Gateway', name: 'gw', sectionName: 'http' } },
  { ns: 'app', ref: { kind: 'HTTPRoute', name: 'r1' } },
  { ns: 'app', ref: { kind: 'HTTPRoute', name: 'r2' } },
  { ns: 'app', ref: { kind: 'HTTPRoute', name: 'r1', sectionName: 'read' } },
];
const NAMES = ['a', 'b', 'c', 'd'];
const STAMPS = ['2026-01-01T00:00:00Z', '2026-01-02T00:00:00Z', '2026-01-03T00:00:00Z'];

const rules = fc.dictionary(fc.constantFrom(...NAMES), fc.integer({ min: 1, max: 9 }).map(L), { maxKeys: 3 });
const block = fc.record({ strategy: fc.constantFrom('atomic', 'merge'), limits: rules });
const specArb = fc.oneof(
  rules.map((limits) => ({ limits })),
  fc.record({ defaults: block }, { requiredKeys: [] }),
  fc.record({ overrides: block }),
  fc.record({ defaults: block, overrides: block }),
);

const policyArb = fc.record({
  target: fc.integer({ min: 0, max: TARGETS.length - 1 }),
  spec: specArb,
  unset: fc.subarray(
    NAMES.map((n) => `limits.${n}`),
    { maxLength: 2 },
  ),
  stamp: fc.constantFrom(...STAMPS),
});

type GenPolicy = typeof policyArb extends fc.Arbitrary<infer T> ? T : never;

function toObject(p: GenPolicy, i: number): PolicyObject {
  const t = TARGETS[p.target]!;
  const spec: Record<string, unknown> = { targetRef: t.ref, ...p.spec };
  if (p.unset.length) spec.unset = p.unset;
  return {
    kind: 'LimitPolicy',
    metadata: { name: `p${i}`, namespace: t.ns, creationTimestamp: p.stamp },
    spec,
  };
}

const build = (objs: PolicyObject[]): PolicyEngine => standardEngine(objs);

const flat = (r: ChainResult | undefined) =>
  r ? [...r.rules.values()].map((x) => [x.key, x.source.name, x.as, JSON.stringify(x.value)]) : undefined;

describe('D/O engine properties', () => {
  const policiesArb = fc.array(policyArb, { maxLength: 8 }).map((ps) => ps.map(toObject));

  it('never yields a rule from a policy that does not reach the path', () => {
    fc.assert(
      fc.property(policiesArb, (objs) => {
        const e = build(objs);
        for (const [path, result] of e.results()) {
          const reaching = new Set(objectKeysOfPath(path).flatMap((k) => e.attachedAt(k)));
          for (const r of result.rules.values()) {
            expect(reaching.has(`LimitPolicy:${r.source.namespace}/${r.source.name}`)).toBe(true);
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it('keeps every rule of the most established override', () => {
    fc.assert(
      fc.property(policiesArb, (objs) => {
        const e = build(objs);
        for (const [path, result] of e.results()) {
          const chain = e.chainOf(path);
          for (let i = chain.length - 1; i >= 0; i--) {
            const o = chain[i]!.policy.blocks.find((b) => b.as === 'override');
            if (!o) continue;
            for (const rule of o.rules) {
              expect(result.rules.get(rule.key)?.source).toEqual(chain[i]!.policy.ref);
            }
            break;
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it('is idempotent: an effective policy resolved again as a bare policy is unchanged', () => {
    fc.assert(
      fc.property(policiesArb, (objs) => {
        const e = build(objs);
        for (const [, result] of e.results()) {
          const limits = Object.fromEntries([...result.rules.values()].map((r) => [r.name, r.value]));
          const again = build([
            {
              kind: 'LimitPolicy',
              metadata: { name: 'eff', namespace: 'app' },
              spec: { targetRef: { kind: 'HTTPRoute', name: 'r1' }, limits },
            },
          ]);
          const r = again.result('Gateway:infra/gw#http|HTTPRoute:app/r1#read')!;
          expect(Object.fromEntries([...r.rules.values()].map((x) => [x.name, x.value]))).toEqual(limits);
        }
      }),
      { numRuns: 100 },
    );
  });

  it('does not depend on the order policies arrive in', () => {
    fc.assert(
      fc.property(
        policiesArb.chain((objs) =>
          fc.tuple(fc.constant(objs), fc.shuffledSubarray(objs, { minLength: objs.length })),
        ),
        ([objs, shuffled]) => {
          const a = build(objs);
          const b = build(shuffled);
          for (const pk of a.topology.paths.keys()) expect(flat(b.result(pk))).toEqual(flat(a.result(pk)));
        },
      ),
      { numRuns: 200 },
    );
  });

  it('incremental == from scratch after random changes (results and every policy status)', () => {
    const change = fc.oneof(
      fc.record({
        op: fc.constant('upsert' as const),
        i: fc.integer({ min: 0, max: 5 }),
        p: policyArb,
        flush: fc.boolean(),
      }),
      fc.record({
        op: fc.constant('remove' as const),
        i: fc.integer({ min: 0, max: 5 }),
        flush: fc.boolean(),
      }),
      fc.record({
        op: fc.constant('route' as const),
        hosts: fc.constantFrom([], ['api.example.com'], ['x.org']),
        flush: fc.boolean(),
      }),
      fc.record({ op: fc.constant('gateway' as const), drop: fc.boolean(), flush: fc.boolean() }),
    );
    fc.assert(
      fc.property(fc.array(change, { maxLength: 20 }), (changes) => {
        const e = build([]);
        const live = new Map<number, PolicyObject>();
        const t = standardTopology();
        const r1 = t.routes[0]!;
        const gw = t.gateways[0]!;
        let gwPresent = true;
        let r1Now = r1;
        // status as a controller keeps it: recomputed only for the policies a flush reports
        const status = new Map<string, string>();
        const idOf = (o: PolicyObject) => `LimitPolicy:${o.metadata.namespace}/${o.metadata.name}`;
        const conds = (engine: PolicyEngine, id: string) =>
          JSON.stringify(policyConditions(engine, id).map((c) => [c.type, c.status, c.reason, c.message]));
        const flushed = () => {
          for (const id of e.flush().policies) status.set(id, conds(e, id));
        };
        for (const c of changes) {
          if (c.op === 'upsert') {
            const o = toObject(c.p, c.i);
            const before = live.get(c.i);
            if (before && before.metadata.namespace !== o.metadata.namespace) {
              e.removePolicy('LimitPolicy', before.metadata.namespace!, before.metadata.name);
            }
            live.set(c.i, o);
            e.upsertPolicy(o);
          } else if (c.op === 'remove') {
            const o = live.get(c.i);
            if (o) e.removePolicy('LimitPolicy', o.metadata.namespace!, o.metadata.name);
            live.delete(c.i);
          } else if (c.op === 'route') {
            r1Now = { ...r1, hostnames: [...c.hosts] };
            e.upsertRoute(r1Now);
          } else {
            if (c.drop) e.removeGateway('infra', 'gw');
            else e.upsertGateway(gw);
            gwPresent = !c.drop;
          }
          if (c.flush) flushed();
        }
        flushed();
        const fresh = new PolicyEngine(testLimitKind);
        fresh.upsertGatewayClass({ name: 'gc' });
        for (const g of t.gateways) if (g.name !== 'gw' || gwPresent) fresh.upsertGateway(g);
        for (const r of t.routes) fresh.upsertRoute(r.name === 'r1' ? r1Now : r);
        // Re-insert in original sequence order so order-of-appearance tie-breaks match.
        for (const o of [...live.entries()].sort((a, b) => a[0] - b[0]).map(([, o]) => o))
          fresh.upsertPolicy(o);
        fresh.flush();
        expect([...e.topology.paths.keys()].sort()).toEqual([...fresh.topology.paths.keys()].sort());
        for (const pk of fresh.topology.paths.keys())
          expect(flat(e.result(pk))).toEqual(flat(fresh.result(pk)));
        expect(e.pathCount).toBe(fresh.pathCount);
        // every live policy's status, kept incrementally, equals the status computed from scratch
        for (const o of live.values()) expect(status.get(idOf(o)), idOf(o)).toBe(conds(fresh, idOf(o)));
      }),
      { numRuns: 300 },
    );
  });
});
