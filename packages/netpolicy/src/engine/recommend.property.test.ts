// Recommended policies never cut what was seen: on random clusters (every tier, pods with and
// without labels and named ports, nodes and outside addresses as peers), the connections the
// direct evaluation allows are "observed"; the policies recommended for each namespace are then
// enforced beside everything else, and every observed connection must still be allowed, by the
// direct evaluation and through the lowered maps.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { NetpolEngine } from './engine.ts';
import type { NetPolicyObject } from './model.ts';
import { PROTO_NAMES } from './ports.ts';
import { type RecommendConnection, type RecommendEnd, recommend } from './recommend.ts';
import { clusterArb, probesFor } from './testing.ts';
import { mapConnection, oracleConnection } from './verdict.ts';

describe('recommend', () => {
  it('keeps every observed connection allowed, in every namespace (random clusters)', () => {
    fc.assert(
      fc.property(
        clusterArb.chain((c) => fc.tuple(fc.constant(c), probesFor(c))),
        fc.boolean(),
        ([cluster, probes], dns) => {
          const before = NetpolEngine.fromCluster(cluster);
          const endOf = (ip: string): RecommendEnd => {
            const pod = before.podAt(ip);
            if (pod) return { pod };
            const node = before.nodeAt(ip)?.name;
            return { address: ip, ...(node ? { node } : {}) };
          };
          const observed: RecommendConnection[] = [];
          for (const p of probes) {
            if (p.proto === 1 || p.port < 1 || p.from === p.to) continue;
            if (oracleConnection(before, p.from, p.to, p.proto, p.port).verdict !== 'allow') continue;
            observed.push({
              src: endOf(p.from),
              dst: endOf(p.to),
              protocol: PROTO_NAMES[p.proto] as RecommendConnection['protocol'],
              port: p.port,
              flows: 1,
            });
          }
          for (const ns of cluster.namespaces) {
            const r = recommend({ namespace: ns.name, pods: cluster.pods, connections: observed, dns });
            const added: NetPolicyObject[] = r.recommendations.map((x) => {
              expect(x.policy.metadata.namespace).toBe(ns.name);
              return {
                kind: 'NetworkPolicy',
                namespace: ns.name,
                name: x.policy.metadata.name,
                spec: JSON.parse(JSON.stringify(x.policy.spec)),
              };
            });
            const after = NetpolEngine.fromCluster({ ...cluster, policies: [...cluster.policies, ...added] });
            for (const p of probes) {
              if (p.proto === 1 || p.port < 1 || p.from === p.to) continue;
              if (oracleConnection(before, p.from, p.to, p.proto, p.port).verdict !== 'allow') continue;
              const what = `${ns.name}: ${p.from} -> ${p.to} ${p.proto}/${p.port}`;
              expect(oracleConnection(after, p.from, p.to, p.proto, p.port).verdict, what).toBe('allow');
              expect(mapConnection(after, p.from, p.to, p.proto, p.port).verdict, what).toBe('allow');
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
