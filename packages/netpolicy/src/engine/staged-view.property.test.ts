// The staged view equals the staged set enforced: one engine holding the enforced policies and staged
// objects judges every probe through its staged tables exactly as a plain engine whose policies are
// the staged set (staged.ts applyStaged) judges it through its enforced tables, and through its
// enforced tables exactly as the engine without any staged object. Identity numbers differ between
// engines (staged rules shape identities too), so verdicts are compared by addresses.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { NetpolEngine } from './engine.ts';
import type { Cluster } from './model.ts';
import { policyKey } from './rules.ts';
import { applyStaged } from './staged.ts';
import { stagedClusterArb as arb, type Probe } from './testing.ts';

function verdicts(e: NetpolEngine, probes: Probe[], view: 'enforced' | 'staged'): string[] {
  return probes.map((p) => `${p.from}>${p.to} ${p.proto}/${p.port} ${mapVerdict(e, p, view)}`);
}

import { mapConnection } from './verdict.ts';

const mapVerdict = (e: NetpolEngine, p: Probe, view: 'enforced' | 'staged') =>
  mapConnection(e, p.from, p.to, p.proto, p.port, view).verdict;

describe('staged view', () => {
  it('judges as the staged set enforced, and leaves the enforced verdicts alone', () => {
    fc.assert(
      fc.property(arb, ([cluster, staged, probes]) => {
        const plain = NetpolEngine.fromCluster(cluster);
        const stagedSet = applyStaged(new Map(cluster.policies.map((p) => [policyKey(p), p])), staged);
        const reference = NetpolEngine.fromCluster({
          ...cluster,
          policies: [...stagedSet.policies.values()],
        } satisfies Cluster);
        // staged after the first flush (incremental), and before it (full)
        const late = NetpolEngine.fromCluster(cluster);
        const keys = staged.map((s) => late.upsertStaged(s));
        late.flush();
        const early = new NetpolEngine();
        for (const ns of cluster.namespaces) early.upsertNamespace(ns);
        for (const n of cluster.nodes) early.upsertNode(n);
        for (const p of cluster.pods) early.upsertPod(p);
        for (const p of cluster.policies) early.upsertPolicy(p);
        for (const s of staged) early.upsertStaged(s);
        early.flush();
        const want = verdicts(reference, probes, 'enforced');
        const enforced = verdicts(plain, probes, 'enforced');
        for (const e of [late, early]) {
          expect(verdicts(e, probes, 'staged')).toEqual(want);
          expect(verdicts(e, probes, 'enforced')).toEqual(enforced);
        }
        // unstaged again: nothing of the staged view is left
        for (const k of keys) late.removeStaged(k);
        late.flush();
        expect(late.stagedEndpointTables.size).toBe(0);
        expect(late.tables.size).toBe(plain.tables.size);
        expect(verdicts(late, probes, 'staged')).toEqual(enforced);
      }),
      { numRuns: Number(process.env.STAGED_RUNS ?? (process.env.CI ? 200 : 100)) },
    );
  });
});
