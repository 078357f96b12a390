import { describe, expect, it } from 'vitest';
import { policyConditions } from '../status/conditions.ts';
import { L, policy, standardEngine, testAuthKind, testLimitKind } from '../testing/index.ts';
import type { PolicyEngine } from './engine.ts';
import type { PolicyObject } from './policy.ts';

const GW = { kind: 'Gateway', name: 'gw' };
const GW2 = { kind: 'Gateway', name: 'gw2' };
const HTTP = { kind: 'Gateway', name: 'gw', sectionName: 'http' };
const CLASS = { kind: 'GatewayClass', name: 'gc' };
const R1 = { kind: 'HTTPRoute', name: 'r1' };
const R2 = { kind: 'HTTPRoute', name: 'r2' };
const READ = { kind: 'HTTPRoute', name: 'r1', sectionName: 'read' };

const P_R1_READ = 'Gateway:infra/gw#http|HTTPRoute:app/r1#read';
const P_R1_RULE2 = 'Gateway:infra/gw#http|HTTPRoute:app/r1#rule-2';
const P_R2_GW = 'Gateway:infra/gw#http|HTTPRoute:app/r2#main';
const P_R2_GW2 = 'Gateway:infra/gw2#web|HTTPRoute:app/r2#main';
const P_R3_HTTP = 'Gateway:infra/gw#http|HTTPRoute:app/r3#rule-1';
const P_R3_ADMIN = 'Gateway:infra/gw#admin|HTTPRoute:app/r3#rule-1';

const gwp = (name: string, spec: Record<string, unknown>, created?: string) =>
  policy(name, 'infra', GW, spec, created ? { created } : {});
const rtp = (name: string, spec: Record<string, unknown>) => policy(name, 'app', R1, spec);

const engineWith = (policies: PolicyObject[], kind = testLimitKind): PolicyEngine =>
  standardEngine(policies, kind);

/** `key -> policy=limit/as` for limits; `key -> policy/as` for other kinds. */
function view(e: PolicyEngine, path: string): Record<string, string> {
  const r = e.result(path);
  if (!r) throw new Error(`no result for ${path}`);
  const out: Record<string, string> = {};
  for (const [k, v] of r.rules) {
    const limit = (v.value as { rates?: { limit: number }[] }).rates?.[0]?.limit;
    out[k] = limit !== undefined ? `${v.source.name}=${limit}/${v.as}` : `${v.source.name}/${v.as}`;
  }
  return out;
}

interface Case {
  name: string;
  policies: PolicyObject[];
  path?: string;
  want: Record<string, string>;
}

const T1 = '2026-01-01T00:00:00Z';
const T2 = '2026-01-02T00:00:00Z';
const T3 = '2026-01-03T00:00:00Z';

const cases: Case[] = [
  // ---- two levels: gateway over route -------------------------------------------------------------
  {
    name: 'bare rules at gateway reach the route as intent',
    policies: [gwp('g', { limits: { a: L(1) } })],
    want: { 'limits.a': 'g=1/intent' },
  },
  {
    name: 'bare at both levels: the route replaces the gateway atomically',
    policies: [gwp('g', { limits: { a: L(1), b: L(1) } }), rtp('r', { limits: { c: L(2) } })],
    want: { 'limits.c': 'r=2/intent' },
  },
  {
    name: 'atomic defaults lose wholly to any lower rule set',
    policies: [
      gwp('g', { defaults: { strategy: 'atomic', limits: { a: L(1), b: L(1) } } }),
      rtp('r', { limits: { b: L(2) } }),
    ],
    want: { 'limits.b': 'r=2/intent' },
  },
  {
    name: 'atomic defaults apply where there is no lower rule',
    policies: [gwp('g', { defaults: { limits: { a: L(1) } } })],
    want: { 'limits.a': 'g=1/default' },
  },
  {
    name: 'merge defaults fill gaps; lower rule wins on the same name',
    policies: [
      gwp('g', { defaults: { strategy: 'merge', limits: { a: L(1), b: L(1) } } }),
      rtp('r', { limits: { b: L(2), c: L(2) } }),
    ],
    want: { 'limits.a': 'g=1/default', 'limits.b': 'r=2/intent', 'limits.c': 'r=2/intent' },
  },
  {
    name: 'atomic overrides replace the whole lower rule set',
    policies: [
      gwp('g', { overrides: { strategy: 'atomic', limits: { a: L(1) } } }),
      rtp('r', { limits: { b: L(2), c: L(2) } }),
    ],
    want: { 'limits.a': 'g=1/override' },
  },
  {
    name: 'merge overrides win on the same name and keep other lower rules',
    policies: [
      gwp('g', { overrides: { strategy: 'merge', limits: { a: L(1), b: L(1) } } }),
      rtp('r', { limits: { b: L(2), c: L(2) } }),
    ],
    want: { 'limits.a': 'g=1/override', 'limits.b': 'g=1/override', 'limits.c': 'r=2/intent' },
  },
  {
    name: 'atomic overrides apply where there is no lower rule',
    policies: [gwp('g', { overrides: { limits: { a: L(1) } } })],
    want: { 'limits.a': 'g=1/override' },
  },
  {
    name: 'defaults and overrides of one policy: defaults merged first, then overrides',
    policies: [
      gwp('g', {
        defaults: { strategy: 'merge', limits: { a: L(1), b: L(1) } },
        overrides: { strategy: 'merge', limits: { c: L(1) } },
      }),
      rtp('r', { limits: { a: L(2), c: L(2) } }),
    ],
    want: { 'limits.a': 'r=2/intent', 'limits.b': 'g=1/default', 'limits.c': 'g=1/override' },
  },
  {
    name: 'a route-level defaults block behaves as the route rule set when nothing is lower',
    policies: [
      gwp('g', { defaults: { strategy: 'merge', limits: { a: L(1) } } }),
      rtp('r', { defaults: { limits: { b: L(2) } } }),
    ],
    want: { 'limits.a': 'g=1/default', 'limits.b': 'r=2/default' },
  },
  {
    name: 'a route-level override is the route rule set when nothing is lower; gateway merge defaults still fill',
    policies: [
      gwp('g', { defaults: { strategy: 'merge', limits: { a: L(1), b: L(1) } } }),
      rtp('r', { overrides: { limits: { b: L(2) } } }),
    ],
    want: { 'limits.a': 'g=1/default', 'limits.b': 'r=2/override' },
  },
  // ---- three levels -----------------------------------------------------------------------------------
  {
    name: 'three levels of merge defaults accumulate',
    policies: [
      policy('c', 'infra', CLASS, { defaults: { strategy: 'merge', limits: { a: L(100) } } }),
      gwp('g', { defaults: { strategy: 'merge', limits: { b: L(1) } } }),
      rtp('r', { limits: { c: L(2) } }),
    ],
    want: { 'limits.a': 'c=100/default', 'limits.b': 'g=1/default', 'limits.c': 'r=2/intent' },
  },
  {
    name: 'three levels of atomic overrides: the least specific wins',
    policies: [
      policy('c', 'infra', CLASS, { overrides: { limits: { a: L(100) } } }),
      gwp('g', { overrides: { limits: { b: L(1) } } }),
      rtp('r', { limits: { c: L(2) } }),
    ],
    want: { 'limits.a': 'c=100/override' },
  },
  {
    name: 'three levels of atomic defaults: the most specific present wins',
    policies: [
      policy('c', 'infra', CLASS, { defaults: { limits: { a: L(100) } } }),
      gwp('g', { defaults: { limits: { b: L(1) } } }),
    ],
    want: { 'limits.b': 'g=1/default' },
  },
  {
    name: 'merge defaults over gateway, route and rule: the most specific name wins',
    policies: [
      gwp('g', { defaults: { strategy: 'merge', limits: { a: L(1) } } }),
      rtp('r', { defaults: { strategy: 'merge', limits: { a: L(2), b: L(2) } } }),
      policy('x', 'app', READ, { limits: { b: L(3) } }),
    ],
    want: { 'limits.a': 'r=2/default', 'limits.b': 'x=3/intent' },
  },
  {
    name: 'merge overrides over gateway, route and rule: the least specific name wins',
    policies: [
      gwp('g', { overrides: { strategy: 'merge', limits: { a: L(1) } } }),
      rtp('r', { overrides: { strategy: 'merge', limits: { a: L(2) } } }),
      policy('x', 'app', READ, { limits: { a: L(3), b: L(3) } }),
    ],
    want: { 'limits.a': 'g=1/override', 'limits.b': 'x=3/intent' },
  },
  {
    name: 'class merge override beats a gateway merge default and a route rule',
    policies: [
      policy('c', 'infra', CLASS, { overrides: { strategy: 'merge', limits: { a: L(100) } } }),
      gwp('g', { defaults: { strategy: 'merge', limits: { a: L(1), b: L(1) } } }),
      rtp('r', { limits: { a: L(2), b: L(2) } }),
    ],
    want: { 'limits.a': 'c=100/override', 'limits.b': 'r=2/intent' },
  },
  {
    name: 'an atomic gateway override wipes route merge overrides and rule rules',
    policies: [
      gwp('g', { overrides: { limits: { x: L(1) } } }),
      rtp('r', { overrides: { strategy: 'merge', limits: { a: L(2) } } }),
      policy('x', 'app', READ, { limits: { b: L(3) } }),
    ],
    want: { 'limits.x': 'g=1/override' },
  },
  {
    name: 'a listener-level default is more specific than the gateway default',
    policies: [
      gwp('g', { defaults: { strategy: 'merge', limits: { a: L(1), b: L(1) } } }),
      policy('l', 'infra', HTTP, { defaults: { strategy: 'merge', limits: { a: L(2) } } }),
    ],
    path: P_R3_HTTP,
    want: { 'limits.a': 'l=2/default', 'limits.b': 'g=1/default' },
  },
  {
    name: 'a listener-level policy does not reach paths through other listeners',
    policies: [
      gwp('g', { defaults: { strategy: 'merge', limits: { a: L(1), b: L(1) } } }),
      policy('l', 'infra', HTTP, { defaults: { strategy: 'merge', limits: { a: L(2) } } }),
    ],
    path: P_R3_ADMIN,
    want: { 'limits.a': 'g=1/default', 'limits.b': 'g=1/default' },
  },
  {
    name: 'a rule-level policy reaches its rule',
    policies: [
      rtp('r', { limits: { a: L(2) } }),
      policy('x', 'app', READ, { overrides: { limits: { z: L(9) } } }),
    ],
    path: P_R1_READ,
    want: { 'limits.z': 'x=9/override' },
  },
  {
    name: 'a rule-level policy does not reach sibling rules',
    policies: [
      rtp('r', { limits: { a: L(2) } }),
      policy('x', 'app', READ, { overrides: { limits: { z: L(9) } } }),
    ],
    path: P_R1_RULE2,
    want: { 'limits.a': 'r=2/intent' },
  },
  // ---- unset --------------------------------------------------------------------------------------
  {
    name: 'unset removes a named merge default',
    policies: [
      gwp('g', { defaults: { strategy: 'merge', limits: { a: L(1), b: L(1) } } }),
      rtp('r', { unset: ['limits.a'], limits: { c: L(2) } }),
    ],
    want: { 'limits.b': 'g=1/default', 'limits.c': 'r=2/intent' },
  },
  {
    name: 'unset by bare rule name matches in any section',
    policies: [
      gwp('g', { defaults: { strategy: 'merge', limits: { a: L(1), b: L(1) } } }),
      rtp('r', { unset: ['a'], limits: { c: L(2) } }),
    ],
    want: { 'limits.b': 'g=1/default', 'limits.c': 'r=2/intent' },
  },
  {
    name: 'unset can never remove an override',
    policies: [
      gwp('g', { overrides: { strategy: 'merge', limits: { a: L(1) } } }),
      rtp('r', { unset: ['limits.a'], limits: { c: L(2) } }),
    ],
    want: { 'limits.a': 'g=1/override', 'limits.c': 'r=2/intent' },
  },
  {
    name: 'a policy with only unset takes the rest of an atomic default',
    policies: [gwp('g', { defaults: { limits: { a: L(1), b: L(1) } } }), rtp('r', { unset: ['limits.a'] })],
    want: { 'limits.b': 'g=1/default' },
  },
  {
    name: 'unset at rule level removes a route-level default',
    policies: [
      rtp('r', { defaults: { strategy: 'merge', limits: { a: L(2), b: L(2) } } }),
      policy('x', 'app', READ, { unset: ['limits.b'] }),
    ],
    path: P_R1_READ,
    want: { 'limits.a': 'r=2/default' },
  },
  {
    name: 'unset acts upward only: it does not remove a more specific rule',
    policies: [rtp('r', { unset: ['limits.a'] }), policy('x', 'app', READ, { limits: { a: L(3) } })],
    path: P_R1_READ,
    want: { 'limits.a': 'x=3/intent' },
  },
  // ---- conditions and constraints -------------------------------------------------------------------
  {
    name: 'an override whose condition holds applies',
    policies: [
      gwp('g', { overrides: { strategy: 'merge', condition: 'has(self.limits.b)', limits: { a: L(1) } } }),
      rtp('r', { limits: { b: L(2) } }),
    ],
    want: { 'limits.a': 'g=1/override', 'limits.b': 'r=2/intent' },
  },
  {
    name: 'an override whose condition is false does not apply',
    policies: [
      gwp('g', { overrides: { strategy: 'merge', condition: 'has(self.limits.zz)', limits: { a: L(1) } } }),
      rtp('r', { limits: { b: L(2) } }),
    ],
    want: { 'limits.b': 'r=2/intent' },
  },
  {
    // fail safe: a tenant must not escape the gateway owner's override by making its condition fail
    name: 'an override whose condition errors applies',
    policies: [
      gwp('g', {
        overrides: { strategy: 'merge', condition: 'self.limits.zz.rates[0].limit > 1', limits: { a: L(1) } },
      }),
      rtp('r', { limits: { b: L(2) } }),
    ],
    want: { 'limits.a': 'g=1/override', 'limits.b': 'r=2/intent' },
  },
  {
    name: 'a default whose condition errors is skipped',
    policies: [
      gwp('g', {
        defaults: { strategy: 'merge', condition: 'self.limits.zz.rates[0].limit > 1', limits: { a: L(1) } },
      }),
      rtp('r', { limits: { b: L(2) } }),
    ],
    want: { 'limits.b': 'r=2/intent' },
  },
  {
    name: 'a default whose condition holds against an empty lower policy applies',
    policies: [gwp('g', { defaults: { condition: 'size(self.limits) == 0', limits: { a: L(1) } } })],
    want: { 'limits.a': 'g=1/default' },
  },
  {
    name: 'a constraint clips a lower value above the maximum',
    policies: [
      gwp('g', {
        overrides: {
          strategy: 'merge',
          condition: "'per-user' in self.limits && self.limits['per-user'].rates[0].limit > 1000",
          limits: { 'per-user': L(1000) },
        },
      }),
      rtp('r', { limits: { 'per-user': L(5000) } }),
    ],
    want: { 'limits.per-user': 'g=1000/override' },
  },
  {
    name: 'a constraint leaves a compliant lower value alone',
    policies: [
      gwp('g', {
        overrides: {
          strategy: 'merge',
          condition: "'per-user' in self.limits && self.limits['per-user'].rates[0].limit > 1000",
          limits: { 'per-user': L(1000) },
        },
      }),
      rtp('r', { limits: { 'per-user': L(500) } }),
    ],
    want: { 'limits.per-user': 'r=500/intent' },
  },
  // ---- N:1 at one level ---------------------------------------------------------------------------------
  {
    name: 'two atomic defaults on one target: the newer wins',
    policies: [
      gwp('old', { defaults: { limits: { a: L(1) } } }, T1),
      gwp('new', { defaults: { limits: { b: L(2) } } }, T2),
    ],
    path: P_R3_HTTP,
    want: { 'limits.b': 'new=2/default' },
  },
  {
    name: 'two atomic overrides on one target: the older wins',
    policies: [
      gwp('new', { overrides: { limits: { b: L(2) } } }, T2),
      gwp('old', { overrides: { limits: { a: L(1) } } }, T1),
    ],
    path: P_R3_HTTP,
    want: { 'limits.a': 'old=1/override' },
  },
  {
    name: 'two merge defaults on one target: the newer wins per name',
    policies: [
      gwp('old', { defaults: { strategy: 'merge', limits: { x: L(1), y: L(1) } } }, T1),
      gwp('new', { defaults: { strategy: 'merge', limits: { x: L(2) } } }, T2),
    ],
    path: P_R3_HTTP,
    want: { 'limits.x': 'new=2/default', 'limits.y': 'old=1/default' },
  },
  {
    name: 'two merge overrides on one target: the older wins per name',
    policies: [
      gwp('old', { overrides: { strategy: 'merge', limits: { x: L(1) } } }, T1),
      gwp('new', { overrides: { strategy: 'merge', limits: { x: L(2), y: L(2) } } }, T2),
    ],
    path: P_R3_HTTP,
    want: { 'limits.x': 'old=1/override', 'limits.y': 'new=2/override' },
  },
  {
    name: 'same creationTimestamp: namespace/name order decides (alphabetically first is established)',
    policies: [
      gwp('zeta', { overrides: { limits: { z: L(2) } } }, T3),
      gwp('alpha', { overrides: { limits: { a: L(1) } } }, T3),
    ],
    path: P_R3_HTTP,
    want: { 'limits.a': 'alpha=1/override' },
  },
  {
    name: 'no creationTimestamp: order of appearance stands in (first is older)',
    policies: [
      gwp('zfirst', { overrides: { limits: { z: L(2) } } }),
      gwp('asecond', { overrides: { limits: { a: L(1) } } }),
    ],
    path: P_R3_HTTP,
    want: { 'limits.z': 'zfirst=2/override' },
  },
  {
    name: 'a policy with a timestamp is older than one without',
    policies: [
      gwp('notime', { overrides: { limits: { z: L(2) } } }),
      gwp('stamped', { overrides: { limits: { a: L(1) } } }, T1),
    ],
    path: P_R3_HTTP,
    want: { 'limits.a': 'stamped=1/override' },
  },
  // ---- topology ---------------------------------------------------------------------------------------
  {
    name: 'a route on two gateways: the gateway override reaches only its own path',
    policies: [
      gwp('g', { overrides: { limits: { a: L(1) } } }),
      policy('r', 'app', R2, { limits: { b: L(2) } }),
    ],
    path: P_R2_GW,
    want: { 'limits.a': 'g=1/override' },
  },
  {
    name: 'a route on two gateways: the other gateway path keeps the route rules',
    policies: [
      gwp('g', { overrides: { limits: { a: L(1) } } }),
      policy('r', 'app', R2, { limits: { b: L(2) } }),
    ],
    path: P_R2_GW2,
    want: { 'limits.b': 'r=2/intent' },
  },
  {
    name: 'targetRefs: one policy on two gateways',
    policies: [
      {
        kind: 'LimitPolicy',
        metadata: { name: 'both', namespace: 'infra' },
        spec: { targetRefs: [GW, GW2], limits: { a: L(7) } },
      },
    ],
    path: P_R2_GW2,
    want: { 'limits.a': 'both=7/intent' },
  },
  {
    name: 'a policy reaching a path through two of its targets counts once',
    policies: [
      {
        kind: 'LimitPolicy',
        metadata: { name: 'twice', namespace: 'infra' },
        spec: { targetRefs: [GW, HTTP], defaults: { strategy: 'merge', limits: { a: L(7) } } },
      },
    ],
    path: P_R3_HTTP,
    want: { 'limits.a': 'twice=7/default' },
  },
];

describe('D/O engine: effective policy per path', () => {
  it('has at least 40 cases', () => expect(cases.length).toBeGreaterThanOrEqual(40));
  it.each(cases)('$name', (c) => {
    const e = engineWith(c.policies);
    for (const p of c.policies) {
      const st = e.policy(`${p.kind}:${p.metadata.namespace}/${p.metadata.name}`);
      expect(st?.errors, `${p.metadata.name} valid`).toEqual([]);
    }
    expect(view(e, c.path ?? P_R1_READ)).toEqual(c.want);
  });
});

describe('D/O engine: provenance', () => {
  it('records which rule replaced which, and who beat the losers', () => {
    const e = engineWith([
      gwp('g', {
        defaults: { strategy: 'merge', limits: { a: L(1), b: L(1) } },
        overrides: { strategy: 'merge', limits: { c: L(1) } },
      }),
      rtp('r', { limits: { a: L(2), c: L(2) } }),
    ]);
    const r = e.result(P_R1_READ)!;
    expect(r.rules.get('limits.a')!.replaced).toMatchObject([
      { key: 'limits.a', source: { name: 'g' }, reason: 'superseded' },
    ]);
    expect(r.rules.get('limits.c')!.replaced).toMatchObject([
      { key: 'limits.c', source: { name: 'r' }, reason: 'overridden' },
    ]);
    expect(r.lost.map((l) => `${l.key}:${l.source.name}<${l.by.map((b) => b.name)}`).sort()).toEqual([
      'limits.a:g<r',
      'limits.c:r<g',
    ]);
    expect(r.steps.map((s) => `${s.policy.name}/${s.block}/${s.outcome}`)).toEqual([
      'r/intent/applied',
      'g/default/applied',
      'g/override/applied',
    ]);
  });

  it("carries each rule its own policy context (request predicates), not the winner's", () => {
    const e = engineWith([
      gwp('g', { defaults: { strategy: 'merge', when: ['request.method == "GET"'], limits: { a: L(1) } } }),
      rtp('r', { limits: { b: L(2) }, when: ['request.path == "/x"'] }),
    ]);
    const r = e.result(P_R1_READ)!;
    expect(r.rules.get('limits.a')!.context).toEqual({ when: ['request.method == "GET"'] });
    expect(r.rules.get('limits.b')!.context).toEqual({ when: ['request.path == "/x"'] });
  });

  it('merges per section for a kind with several sections', () => {
    const auth = (
      name: string,
      ns: string,
      t: { kind: string; name: string },
      spec: Record<string, unknown>,
    ) => policy(name, ns, t, spec, { kind: 'GuardPolicy' });
    const e = engineWith(
      [
        auth('g', 'infra', GW, {
          defaults: {
            strategy: 'merge',
            rules: { authentication: { 'api-key': { k: 1 } }, authorization: { admins: {} } },
          },
        }),
        auth('r', 'app', R1, { rules: { authentication: { jwt: {} }, authorization: { admins: { x: 2 } } } }),
      ],
      testAuthKind,
    );
    expect(view(e, P_R1_READ)).toEqual({
      'authentication.api-key': 'g/default',
      'authentication.jwt': 'r/intent',
      'authorization.admins': 'r/intent',
    });
  });
});

describe('D/O engine: status', () => {
  const status = (e: PolicyEngine, id: string) =>
    Object.fromEntries(policyConditions(e, id).map((c) => [c.type, `${c.status}/${c.reason}: ${c.message}`]));

  it('reports a refused unset of an override on the unsetting policy', () => {
    const e = engineWith([
      gwp('g', { overrides: { strategy: 'merge', limits: { a: L(1) } } }),
      rtp('r', { unset: ['limits.a'], limits: { c: L(2) } }),
    ]);
    expect(status(e, 'LimitPolicy:app/r').Enforced).toMatch(
      /unset of limits.a refused: an override of infra\/g cannot be unset/,
    );
  });

  it('names the overriding policy, rules and routes in PartiallyEnforced and Overridden', () => {
    const e = engineWith([
      gwp('g', { overrides: { strategy: 'merge', limits: { a: L(1) } } }),
      rtp('r', { limits: { a: L(2), b: L(2) } }),
    ]);
    expect(status(e, 'LimitPolicy:app/r').Enforced).toBe(
      'True/PartiallyEnforced: Policy has been partially enforced on 2 path(s); overridden: limits.a by infra/g (routes app/r1)',
    );
    const e2 = engineWith([
      gwp('g', { overrides: { limits: { a: L(1) } } }),
      rtp('r', { limits: { b: L(2) } }),
    ]);
    expect(status(e2, 'LimitPolicy:app/r').Enforced).toBe(
      'False/Overridden: Policy has been overridden: limits.b by infra/g (routes app/r1)',
    );
    expect(status(e2, 'LimitPolicy:infra/g').Enforced).toMatch(
      /^True\/Enforced: Policy has been enforced on 5 path\(s\)/,
    );
  });

  it('reports same-target overlaps naming both policies', () => {
    const e = engineWith([gwp('a', { limits: { a: L(1) } }, T1), gwp('b', { limits: { b: L(1) } }, T2)]);
    expect(status(e, 'LimitPolicy:infra/a').Accepted).toMatch(
      /Gateway infra\/gw is also targeted by infra\/b/,
    );
    expect(status(e, 'LimitPolicy:infra/b').Accepted).toMatch(/also targeted by infra\/a/);
  });

  it('reports condition errors as status, not as a crash', () => {
    const e = engineWith([
      gwp('g', { overrides: { condition: 'self.limits.nope.x > 1', limits: { a: L(1) } } }),
    ]);
    expect(status(e, 'LimitPolicy:infra/g').Enforced).toMatch(
      /condition failed on 5 path\(s\): No such key: nope/,
    );
  });

  it('a target that does not exist yields TargetNotFound, and the policy comes alive when it appears', () => {
    const e = engineWith([
      policy('late', 'app', { kind: 'HTTPRoute', name: 'late' }, { limits: { a: L(4) } }),
    ]);
    expect(status(e, 'LimitPolicy:app/late').Accepted).toBe(
      'False/TargetNotFound: Policy target HTTPRoute app/late was not found',
    );
    e.upsertRoute({
      kind: 'HTTPRoute',
      namespace: 'app',
      name: 'late',
      parentRefs: [{ name: 'gw', namespace: 'infra' }],
      rules: [{}],
    });
    const report = e.flush();
    expect(report.changed.sort()).toEqual([
      'Gateway:infra/gw#admin|HTTPRoute:app/late#rule-1',
      'Gateway:infra/gw#http|HTTPRoute:app/late#rule-1',
    ]);
    expect(report.policies).toContain('LimitPolicy:app/late');
    expect(status(e, 'LimitPolicy:app/late').Accepted).toMatch(/^True\/Accepted/);
    expect(view(e, 'Gateway:infra/gw#http|HTTPRoute:app/late#rule-1')).toEqual({
      'limits.a': 'late=4/intent',
    });
  });

  it('a route attaching later reaches the gateway policy: its status is recomputed (reach changed)', () => {
    const e = engineWith([
      policy('gw-wide', 'infra', { kind: 'Gateway', name: 'gw' }, { limits: { a: L(4) } }),
    ]);
    e.flush();
    e.upsertRoute({
      kind: 'HTTPRoute',
      namespace: 'app',
      name: 'newcomer',
      parentRefs: [{ name: 'gw', namespace: 'infra' }],
      rules: [{}],
    });
    expect(e.flush().policies).toContain('LimitPolicy:infra/gw-wide');
    e.removeRoute('HTTPRoute', 'app', 'newcomer');
    expect(e.flush().policies).toContain('LimitPolicy:infra/gw-wide');
  });

  it('a rule-level target that does not exist yields TargetNotFound', () => {
    const e = engineWith([
      policy('x', 'app', { kind: 'HTTPRoute', name: 'r1', sectionName: 'nope' }, { limits: { a: L(4) } }),
    ]);
    expect(status(e, 'LimitPolicy:app/x').Accepted).toBe(
      'False/TargetNotFound: Policy target HTTPRoute app/r1 section nope was not found',
    );
  });

  it('a kind with one policy per target reports the newer one Conflicted', () => {
    const oneToOne = { ...testLimitKind, maxPoliciesPerTarget: 1 };
    const e = engineWith(
      [gwp('b', { limits: { b: L(1) } }, T2), gwp('a', { limits: { a: L(1) } }, T1)],
      oneToOne,
    );
    expect(status(e, 'LimitPolicy:infra/b').Accepted).toMatch(
      /^False\/Conflicted: Policy is conflicted by infra\/a/,
    );
    expect(view(e, P_R3_HTTP)).toEqual({ 'limits.a': 'a=1/intent' });
  });
});

describe('D/O engine: wildcard constraints', () => {
  const cap = {
    overrides: {
      strategy: 'merge',
      condition: 'rule.value.rates.exists(r, r.limit > 1000)',
      limits: { '*': { rates: [{ limit: 1000, window: '1m' }] } },
    },
  };

  it('clips every lower rule above the cap and keeps its other fields', () => {
    const e = engineWith([
      gwp('cap', cap),
      rtp('r', {
        limits: { big: { rates: [{ limit: 5000, window: '1m' }], counters: ['user'] }, small: L(10) },
      }),
    ]);
    const r = e.result(P_R1_READ)!;
    expect(view(e, P_R1_READ)).toEqual({ 'limits.big': 'cap=1000/override', 'limits.small': 'r=10/intent' });
    expect(r.rules.get('limits.big')!.value).toEqual({
      rates: [{ limit: 1000, window: '1m' }],
      counters: ['user'],
    });
    expect(r.rules.get('limits.big')!.replaced).toMatchObject([{ source: { name: 'r' }, reason: 'clipped' }]);
    expect(policyConditions(e, 'LimitPolicy:app/r').find((c) => c.type === 'Enforced')).toMatchObject({
      status: 'True',
      reason: 'PartiallyEnforced',
      message:
        'Policy has been partially enforced on 2 path(s); overridden: limits.big (clipped) by infra/cap (routes app/r1)',
    });
  });

  it('clips rules that lower defaults brought in too, and nothing when all comply', () => {
    const e = engineWith([
      gwp('cap', cap),
      rtp('r', { defaults: { strategy: 'merge', limits: { a: L(2000) } } }),
    ]);
    expect(view(e, P_R1_READ)).toEqual({ 'limits.a': 'cap=1000/override' });
    const ok = engineWith([gwp('cap', cap), rtp('r', { limits: { a: L(20) } })]);
    expect(view(ok, P_R1_READ)).toEqual({ 'limits.a': 'r=20/intent' });
  });

  it('refuses "*" outside a merge overrides block, and mixed with named rules', () => {
    const e = engineWith([
      gwp('d', { defaults: { strategy: 'merge', limits: { '*': L(1) } } }),
      gwp('m', { overrides: { strategy: 'merge', limits: { '*': L(1), x: L(1) } } }),
    ]);
    expect(e.policy('LimitPolicy:infra/d')!.errors).toEqual([
      'spec.defaults.limits: a "*" rule (constraint) is only allowed in overrides with strategy: merge',
    ]);
    expect(e.policy('LimitPolicy:infra/m')!.errors).toEqual([
      'spec.overrides.limits: a constraint block (with a "*" rule) may hold only "*" rules',
    ]);
  });
});

describe('D/O engine: revisions', () => {
  it('a policy deleted and created again with other content is not served from the old cached chain', () => {
    const e = engineWith([gwp('p', { defaults: { limits: {} } })]);
    e.removePolicy('LimitPolicy', 'infra', 'p');
    e.upsertPolicy(gwp('p', { defaults: { limits: { a: L(1) } } }));
    e.flush();
    expect(view(e, P_R3_HTTP)).toEqual({ 'limits.a': 'p=1/default' });
  });
});
