// Limitador rendering, from the semantics: one ConfigMap per gateway, one limit per (effective limit,
// rate), counters as variables, scope explicit, predicates of the rule's own policy.
import { pathHostnames, renderGateway, toPathResult } from '@cascade/core';
import { policy, standardEngine } from '@cascade/core/testing';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { rateLimitPolicyKind } from './kind.ts';
import { type ActionGroup, expandActions, type LimitadorLimit } from './render.ts';

const RLP = { kind: 'RateLimitPolicy' };
const rate = (limit: number, window = '1m') => ({ rates: [{ limit, window }] });

function rendered(policies: ReturnType<typeof policy>[], gateway = 'gw') {
  const e = standardEngine(policies, rateLimitPolicyKind);
  const objs = [...renderGateway(e, 'infra', gateway, 'ratelimitpolicy-controller', 'uid-1').values()];
  const cm = objs[0] as { metadata: Record<string, unknown>; data: Record<string, string> } | undefined;
  return {
    e,
    objs,
    cm,
    limits: cm ? (parse(cm.data['limits.yaml']!) as LimitadorLimit[]) : [],
    actions: cm ? expandActions(parse(cm.data['actions.yaml']!) as ActionGroup[]) : [],
  };
}

describe('RateLimitPolicy -> Limitador', () => {
  it('renders nothing for a gateway without limits', () => {
    expect(rendered([]).objs).toEqual([]);
  });

  it('a gateway default: one ConfigMap per gateway, one limit shared by its routes (scope gateway)', () => {
    const { objs, cm, limits, actions } = rendered([
      policy(
        'platform',
        'infra',
        { kind: 'Gateway', name: 'gw' },
        { defaults: { limits: { global: rate(100) } } },
        RLP,
      ),
    ]);
    expect(objs).toHaveLength(1);
    expect(cm!.metadata).toMatchObject({
      name: 'limitador-limits-gw',
      namespace: 'infra',
      labels: {
        'cascade.dev/managed-by': 'ratelimitpolicy-controller',
        'cascade.dev/policy-kind': 'RateLimitPolicy',
      },
      ownerReferences: [{ kind: 'Gateway', name: 'gw', uid: 'uid-1' }],
    });
    expect(limits).toHaveLength(1);
    expect(limits[0]).toMatchObject({
      namespace: 'infra/gw',
      max_value: 100,
      seconds: 60,
      variables: [],
      name: 'global from RateLimitPolicy infra/platform (default), scope gateway',
    });
    expect(limits[0]!.conditions).toEqual([
      expect.stringMatching(/^descriptors\[0\]\["cascade\.limit\.global__[0-9a-f]{12}"\] == "1"$/),
    ]);
    // Every path through gw (r1: 2 rules, r2, r3; http and admin listeners where hostnames allow) sends it.
    expect(actions.length).toBeGreaterThanOrEqual(4);
    for (const a of actions)
      expect(a.actions.map((x) => x.limit)).toEqual([limits[0]!.conditions[0]!.match(/limit\.(\w+)"/)![1]]);
  });

  it('a route limit counts per route: the route is a variable; counters and windows carried', () => {
    const { limits, actions } = rendered([
      policy(
        'own',
        'app',
        { kind: 'HTTPRoute', name: 'r1' },
        {
          limits: {
            user: {
              rates: [
                { limit: 5, window: '10s' },
                { limit: 100, window: '1h' },
              ],
              counters: [{ expression: 'auth.identity.userid' }],
            },
          },
        },
        RLP,
      ),
    ]);
    expect(limits.map((l) => [l.max_value, l.seconds])).toEqual([
      [5, 10],
      [100, 3600],
    ]);
    for (const l of limits) {
      expect(l.variables).toEqual([
        'descriptors[0]["auth.identity.userid"]',
        'descriptors[0]["cascade.route"]',
      ]);
      expect(l.name).toMatch(/^user\[\d\] from RateLimitPolicy app\/own \(own rule\), scope route$/);
    }
    const r1 = actions.filter((a) => a.route === 'HTTPRoute/app/r1');
    expect(r1.map((a) => a.rule).sort()).toEqual(['read', 'rule-2']);
    expect(r1[0]!.actions[0]!.data).toEqual([
      { key: 'auth.identity.userid', expression: 'auth.identity.userid' },
      { key: 'cascade.route', expression: '"app/r1"' },
    ]);
    expect(r1[0]!.hostnames).toEqual(['api.example.com']);
  });

  it('an explicit scope wins over the level default and shows in the effective policy', () => {
    const e = standardEngine(
      [
        policy(
          'platform',
          'infra',
          { kind: 'Gateway', name: 'gw' },
          { defaults: { limits: { g: { ...rate(10), scope: 'route' } } } },
          RLP,
        ),
        policy(
          'shared',
          'infra',
          { kind: 'Gateway', name: 'gw2' },
          { limits: { s: { ...rate(7), scope: 'shared' } } },
          RLP,
        ),
      ],
      rateLimitPolicyKind,
    );
    const gw = parse(
      (
        renderGateway(e, 'infra', 'gw', 'c').values().next().value as unknown as {
          data: Record<string, string>;
        }
      ).data['limits.yaml']!,
    ) as LimitadorLimit[];
    expect(gw[0]!.variables).toEqual(['descriptors[0]["cascade.route"]']);
    expect(gw[0]!.name).toContain('scope route');
    const gw2 = parse(
      (
        renderGateway(e, 'infra', 'gw2', 'c').values().next().value as unknown as {
          data: Record<string, string>;
        }
      ).data['limits.yaml']!,
    ) as LimitadorLimit[];
    expect(gw2[0]!.namespace).toBe('cascade/shared');
    // The effective policy states the scope, including the defaulted one.
    const [path, r] = [...e.results()].find(([p]) => p.gateway.name === 'gw' && p.route.name === 'r3')!;
    expect(toPathResult('RateLimitPolicy', path, r, rateLimitPolicyKind).rules['limits.g']!.value).toEqual({
      ...rate(10),
      scope: 'route',
    });
    const e2 = standardEngine(
      [
        policy(
          'platform',
          'infra',
          { kind: 'Gateway', name: 'gw' },
          { defaults: { limits: { g: rate(10) } } },
          RLP,
        ),
      ],
      rateLimitPolicyKind,
    );
    const [p2, r2] = [...e2.results()][0]!;
    expect(
      toPathResult('RateLimitPolicy', p2, r2, rateLimitPolicyKind).rules['limits.g']!.value,
    ).toMatchObject({ scope: 'gateway' });
  });

  it("a default merged into a route keeps its own policy's predicates, not the route policy's", () => {
    const { actions, limits } = rendered([
      policy(
        'platform',
        'infra',
        { kind: 'Gateway', name: 'gw' },
        {
          defaults: {
            strategy: 'merge',
            limits: { global: rate(100) },
            when: [{ predicate: 'request.method == "GET"' }],
          },
        },
        RLP,
      ),
      policy(
        'own',
        'app',
        { kind: 'HTTPRoute', name: 'r3' },
        {
          limits: { mine: { ...rate(5), when: [{ predicate: 'request.path == "/x"' }] } },
          when: [{ predicate: 'request.host == "r3"' }],
        },
        RLP,
      ),
    ]);
    const r3 = actions.find((a) => a.route === 'HTTPRoute/app/r3')!;
    const byName = (n: string) =>
      r3.actions.find((a) =>
        limits.some((l) => l.name.startsWith(`${n} `) && l.conditions[0]!.includes(a.limit)),
      )!;
    expect(byName('global').predicates).toEqual(['request.method == "GET"']);
    expect(byName('mine').predicates).toEqual(['request.path == "/x"', 'request.host == "r3"']);
  });

  it("a limit clipped by a constraint keeps its author's route scope", () => {
    const { limits } = rendered([
      policy(
        'cap',
        'infra',
        { kind: 'Gateway', name: 'gw' },
        { overrides: { strategy: 'merge', limits: { '*': rate(1000) } } },
        RLP,
      ),
      policy('own', 'app', { kind: 'HTTPRoute', name: 'r3' }, { limits: { mine: rate(5000) } }, RLP),
    ]);
    expect(limits).toHaveLength(1);
    expect(limits[0]).toMatchObject({ max_value: 1000, variables: ['descriptors[0]["cascade.route"]'] });
    expect(limits[0]!.name).toBe('mine from RateLimitPolicy infra/cap (override), scope route');
  });
});

describe("Limitador's namespace", () => {
  it('with limitadorNamespace every ConfigMap goes there, named by gateway namespace and name, without an owner', () => {
    const e = standardEngine(
      [policy('p', 'infra', { kind: 'Gateway', name: 'gw' }, { limits: { a: rate(5) } }, RLP)],
      rateLimitPolicyKind,
    );
    const settings = { limitadorNamespace: 'kuadrant-system' };
    const [cm] = [...renderGateway(e, 'infra', 'gw', 'c', 'uid-1', [], settings).values()] as {
      metadata: {
        name: string;
        namespace: string;
        ownerReferences?: unknown[];
        annotations: Record<string, string>;
      };
    }[];
    expect(cm!.metadata.namespace).toBe('kuadrant-system');
    expect(cm!.metadata.name).toMatch(/^limitador-limits-infra-gw-[0-9a-f]{10}$/);
    expect(cm!.metadata.ownerReferences).toBeUndefined();
    expect(cm!.metadata.annotations['cascade.dev/gateway']).toBe('infra/gw');
    // without the setting: beside the gateway, owned by it
    const [beside] = [...renderGateway(e, 'infra', 'gw', 'c', 'uid-1').values()] as {
      metadata: { namespace: string; ownerReferences?: unknown[] };
    }[];
    expect(beside!.metadata.namespace).toBe('infra');
    expect(beside!.metadata.ownerReferences).toHaveLength(1);
  });
});

describe('pathHostnames', () => {
  it('narrows route hostnames by the listener hostname', () => {
    expect(pathHostnames('*.example.com', ['api.example.com', 'other.io'])).toEqual(['api.example.com']);
    expect(pathHostnames('api.example.com', ['*.example.com'])).toEqual(['api.example.com']);
    expect(pathHostnames(undefined, ['a.io'])).toEqual(['a.io']);
    expect(pathHostnames('*.example.com', undefined)).toEqual(['*.example.com']);
    expect(pathHostnames(undefined, [])).toEqual(['*']);
  });
});
