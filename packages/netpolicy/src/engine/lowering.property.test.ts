// The test that proves the lowering: for random clusters, policies and probes, the verdict read from
// the lowered MapState (the datapath's lookup) equals the direct evaluation of the ordered policy.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { engineFor, probedClusterArb } from './testing.ts';
import { mapConnection, oracleConnection } from './verdict.ts';

describe('lowering == direct evaluation', () => {
  it('agrees on every probe for random clusters', () => {
    fc.assert(
      fc.property(probedClusterArb, (x) => {
        const e = engineFor(x);
        const { probes } = x;
        for (const p of probes) {
          const want = oracleConnection(e, p.from, p.to, p.proto, p.port);
          const got = mapConnection(e, p.from, p.to, p.proto, p.port);
          if (got.verdict !== want.verdict) {
            throw new Error(
              `probe ${JSON.stringify(p)}: map ${got.verdict} (${JSON.stringify({ e: got.egress?.entry, i: got.ingress?.entry })}) != oracle ${want.verdict} (${JSON.stringify(want)})`,
            );
          }
          expect(got.egress?.verdict).toBe(want.egress?.verdict);
          expect(got.ingress?.verdict).toBe(want.ingress?.verdict);
        }
      }),
      { numRuns: 1500 },
    );
  });
});
