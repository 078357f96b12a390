// Admin policy edits rebuild only what they reach: after any sequence of ANP, BANP and CNP edits
// (subjects, rules, priorities changed, policies removed), the scoped state equals a fresh
// computation, every object outside what an update reported as changed is the very object it was,
// and the exact analysis run for the reached namespaces equals the whole one.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { NetpolEngine } from '../engine/engine.ts';
import { adminPolicyArb, clusterArb } from '../engine/testing.ts';
import { networkEffectives } from './published.ts';
import { networkPolicyConditions } from './published-conditions.ts';
import { PublishedState } from './published-state.ts';

const step = fc.oneof(
  { weight: 4, arbitrary: adminPolicyArb.map((p) => ({ op: 'upsert' as const, p })) },
  {
    weight: 1,
    arbitrary: fc.constantFrom('a0', 'a1', 'c0', 'c1', 'default').map((n) => ({ op: 'remove' as const, n })),
  },
);

describe('admin policy edits, scoped', () => {
  it('equal a full recomputation after any sequence, and leave every unreached object as it was', () => {
    let scoped = 0;
    fc.assert(
      fc.property(clusterArb, fc.array(step, { minLength: 1, maxLength: 6 }), (c, steps) => {
        const engine = NetpolEngine.fromCluster(c);
        // the analysis is due at every update: each one runs it (scoped when only policies changed)
        const state = new PublishedState({ analysisIntervalMs: 0, now: () => 0 });
        state.update(engine);
        for (const s of steps) {
          if (s.op === 'upsert') engine.upsertPolicy(s.p);
          else
            for (const kind of ['AdminNetworkPolicy', 'BaselineAdminNetworkPolicy', 'ClusterNetworkPolicy'])
              engine.removePolicy(`${kind}/${s.n}`);
          engine.flush();
          const before = new Map(state.effectives);
          const u = state.update(engine);
          if (u.changed) {
            scoped++;
            const changed = new Set(u.changed);
            for (const [k, e] of state.effectives) if (!changed.has(k)) expect(e).toBe(before.get(k));
          }
          const fresh = new Map(networkEffectives(engine).map((e) => [`${e.namespace}/${e.name}`, e]));
          expect(state.effectives).toEqual(fresh);
          expect(state.conditions).toEqual(networkPolicyConditions(engine));
        }
      }),
      { numRuns: 400 },
    );
    // most updates took the scoped path (none fell back to a full rebuild without a reason)
    expect(scoped).toBeGreaterThan(0);
  });
});
