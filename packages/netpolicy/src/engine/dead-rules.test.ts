// The dead-rule analysis evaluates classes of pods that every rule treats alike: checked against the
// pod-by-pod enumeration it replaced, on random clusters with twin pods (same labels, other address,
// node or named ports) and, often, an admin rule that decides much of the traffic.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  adminDecision,
  deadNetworkPolicyRules,
  externalPoints,
  portBoundaries,
  portPoints,
} from './dead-rules.ts';
import { NetpolEngine } from './engine.ts';
import { type Remote, ruleMatches } from './evaluate.ts';
import type { Cluster, NetPolicyObject } from './model.ts';
import { namespaceMatches } from './selection.ts';
import { clusterArb, TEST_NODES } from './testing.ts';
import { ruleSetOf } from './verdict.ts';

/** Every local pod, every remote, every port piece: what the analysis must equal (no budget). */
function reference(engine: NetpolEngine) {
  const rs = ruleSetOf(engine);
  if (rs.admin.length === 0) return [];
  const pointsOf = portPoints(engine, portBoundaries(engine));
  const pods = [...engine.pods.values()];
  const remotes: Remote[] = [
    ...pods.map((pod): Remote => ({ kind: 'pod', pod, ip: pod.ips[0]! })),
    ...[...engine.nodes.values()].map((node): Remote => ({ kind: 'node', node, ip: node.ips[0]! })),
    ...externalPoints(engine),
  ];
  const out: { rule: string; connections: number; deciders: Record<string, number> }[] = [];
  for (const r of engine.rules.np) {
    let connections = 0;
    let live = false;
    const deciders: Record<string, number> = {};
    const points = pointsOf(r);
    outer: for (const local of pods) {
      if (
        local.namespace !== r.source.namespace ||
        !namespaceMatches(r.subject.namespaces, local.namespace, rs.nsLabels(local.namespace))
      )
        continue;
      for (const remote of remotes) {
        if (remote.kind === 'pod' && remote.pod === local) continue;
        if (remote.kind === 'node' && remote.node.name === local.node) continue;
        for (const [proto, port] of points) {
          if (!ruleMatches(r, local, remote, r.direction, proto, port, rs)) continue;
          const a = adminDecision(rs, local, remote, r, proto, port);
          if (!a) {
            live = true;
            break outer;
          }
          connections++;
          deciders[a.id] = (deciders[a.id] ?? 0) + 1;
        }
      }
    }
    if (!live && connections > 0) out.push({ rule: r.id, connections, deciders });
  }
  return out;
}

const decideMost = (action: 'Allow' | 'Deny'): NetPolicyObject => ({
  kind: 'AdminNetworkPolicy',
  name: 'decides-most',
  spec: {
    priority: 0,
    subject: { namespaces: {} },
    ingress: [{ action, from: [{ namespaces: {} }] }],
    egress: [{ action, to: [{ namespaces: {} }] }],
  },
});

describe('dead NetworkPolicy rules, by classes of pods', () => {
  it('equals the pod-by-pod enumeration, connections and deciders counted alike', () => {
    fc.assert(
      fc.property(
        clusterArb,
        fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }),
        fc.constantFrom(undefined, 'Allow', 'Deny'),
        (c, twins, most) => {
          const cluster: Cluster = {
            ...c,
            pods: c.pods.flatMap((p, i) =>
              twins[i]
                ? [
                    p,
                    { ...p, name: `${p.name}-b`, ips: [`10.0.1.${i + 1}`], node: TEST_NODES[1]!.name },
                    { ...p, name: `${p.name}-c`, ips: [`10.0.0.${i + 101}`] },
                    { ...p, name: `${p.name}-d`, ips: [`10.0.0.${i + 111}`], ports: [] },
                  ]
                : [p],
            ),
            policies: most ? [decideMost(most), ...c.policies] : c.policies,
          };
          const engine = NetpolEngine.fromCluster(cluster);
          const { dead, skipped } = deadNetworkPolicyRules(engine);
          expect(skipped).toBe(0);
          const got = dead.map((d) => ({
            rule: d.rule.id,
            connections: d.connections,
            // deciders are named by rule name when they have one: compare by the rule id
            deciders: Object.fromEntries(
              [...d.deciders].map(([name, x]) => [
                engine.rules.admin.find((a) => name === a.id || name.endsWith(`#${a.source.ruleName}`))!.id,
                x.count,
              ]),
            ),
          }));
          expect(got).toEqual(reference(engine));
        },
      ),
      { numRuns: 1000 },
    );
  });
});
