// The fast paths a probe takes (the address indexes, a pod's own part of the rule set) give exactly
// what the plain scans gave, on random clusters, with and without identity caps.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { contains, hostPrefix } from './cidr.ts';
import type { NetpolEngine } from './engine.ts';
import { evaluateConnection } from './evaluate.ts';
import { ID } from './identities.ts';
import { engineFor, probedClusterArb, TEST_NODES } from './testing.ts';
import { oracleConnection, remoteOf, ruleSetOf } from './verdict.ts';

function scanIdentity(e: NetpolEngine, ip: string, node?: string): number {
  const h = hostPrefix(ip);
  if (!h) return ID.WORLD;
  let best: { prefix: { len: number }; identity: number } | undefined;
  for (const x of e.ipcache(node))
    if (contains(x.prefix, h) && (!best || x.prefix.len > best.prefix.len)) best = x;
  return best?.identity ?? (h.family === 6 ? ID.WORLD6 : ID.WORLD);
}

describe('probe fast paths == plain scans', () => {
  it('identityOf, podAt, nodeAt and the per-pod rule sets agree with the scans', () => {
    fc.assert(
      fc.property(probedClusterArb, (x) => {
        const e = engineFor(x);
        const { probes } = x;
        for (const p of probes) {
          for (const ip of [p.from, p.to]) {
            for (const node of [undefined, ...TEST_NODES.map((n) => n.name)])
              expect(e.identityOf(ip, node)).toBe(scanIdentity(e, ip, node));
            expect(e.podAt(ip)).toBe([...e.pods.values()].find((x) => x.ips.includes(ip)));
            expect(e.nodeAt(ip)).toBe([...e.nodes.values()].find((x) => x.ips.includes(ip)));
          }
          const whole = evaluateConnection(
            ruleSetOf(e),
            remoteOf(e, p.from),
            remoteOf(e, p.to),
            p.proto,
            p.port,
          );
          expect(oracleConnection(e, p.from, p.to, p.proto, p.port)).toEqual(whole);
        }
      }),
      { numRuns: 600 },
    );
  });
});
