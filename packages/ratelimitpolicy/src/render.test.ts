// Limitador rendering, from the semantics: one ConfigMap per gateway, one limit per (effective limit,
// rate), counters as variables, scope explicit, predicates of the rule's own policy.
import { pathHostnames, pathKey, renderContext, renderGateway, toPathResult } from '@cascade/core';
import { policy, standardEngine } from '@cascade/core/testing';
import { PHASE, type WasmAction } from '@cascade/wiring';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { rateLimitPolicyKind } from './kind.ts';
import { type LimitadorLimit, rateLimitActions } from './render.ts';

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
    actions: actionsOf(e, gateway),
  };
}

/** The wasm-shim rate-limit actions of every path, one entry per path. */
function actionsOf(e: ReturnType<typeof standardEngine>, gateway: string) {
  const ctx = renderContext(e, 'infra', gateway, 'ratelimitpolicy-controller')!;
  const byPath = rateLimitActions(ctx);
  return ctx.paths
    .filter((p) => byPath.has(pathKey(p.path)))
    .map((p) => ({
      route: `${p.path.route.kind}/${p.path.route.namespace}/${p.path.route.name}`,
      rule: p.path.rule,
      hostnames: p.hostnames,
      actions: byPath.get(pathKey(p.path))!.map((a) => a.action) as WasmAction[],
    }));
}

/** The limit keys a wasm action sends (the `limit.*` entries of its blocks). */
const keysOf = (a: WasmAction) =>
  (a.conditionalData ?? []).flatMap((b) =>
    b.data.map((d) => d.expression.key).filter((k) => k.startsWith('limit.')),
  );

describe('RateLimitPolicy -> Limitador', () => {
  it('renders nothing for a gateway without limits', () => {
    expect(rendered([]).objs).toEqual([]);
  });

  it('a gateway default: one ConfigMap per gateway, the limit counted per route (as kuadrant-operator counts)', () => {
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
    // one limit per route the default reaches, each in the route's own namespace
    const routes = [...new Set(actions.map((a) => a.route.split('/').slice(1).join('/')))].sort();
    expect(limits.map((l) => l.namespace).sort()).toEqual(routes);
    for (const l of limits) {
      expect(l).toMatchObject({
        max_value: 100,
        seconds: 60,
        variables: [],
        name: 'global from RateLimitPolicy infra/platform (default), scope route',
      });
      expect(l.conditions).toEqual([
        expect.stringMatching(/^descriptors\[0\]\["limit\.global__[0-9a-f]{8}"\] == "1"$/),
      ]);
    }
    // Every path through gw (r1: 2 rules, r2, r3; http and admin listeners where hostnames allow) sends
    // the key of its route's limit, in its route's namespace
    expect(actions.length).toBeGreaterThanOrEqual(4);
    for (const a of actions) {
      const ns = a.route.split('/').slice(1).join('/');
      expect(a.actions.map((x) => x.scope)).toEqual([ns]);
      const mine = limits.find((l) => l.namespace === ns)!;
      expect(keysOf(a.actions[0]!)).toEqual([mine.conditions[0]!.match(/"(limit\.\w+)"/)![1]]);
    }
  });

  it("a route limit counts in the route's namespace; counters and windows carried; after auth when it reads auth.*", () => {
    const { e, limits, actions } = rendered([
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
      expect(l.namespace).toBe('app/r1');
      expect(l.variables).toEqual(['descriptors[0]["auth.identity.userid"]']);
      expect(l.name).toMatch(/^user\[\d\] from RateLimitPolicy app\/own \(own rule\), scope route$/);
    }
    const r1 = actions.filter((a) => a.route === 'HTTPRoute/app/r1');
    expect(r1.map((a) => a.rule).sort()).toEqual(['read', 'rule-2']);
    expect(r1[0]!.actions[0]!.conditionalData![0]!.data.slice(1)).toEqual([
      { expression: { key: 'auth.identity.userid', value: 'auth.identity.userid' } },
    ]);
    expect(r1[0]!.hostnames).toEqual(['api.example.com']);
    // it reads auth.*: the action runs after auth
    const phases = [...rateLimitActions(renderContext(e, 'infra', 'gw', 'c')!).values()]
      .flat()
      .map((a) => a.phase);
    expect(new Set(phases)).toEqual(new Set([PHASE.rateLimitAfterAuth]));
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
    expect(gw.every((l) => l.variables.length === 0 && /^[a-z0-9-]+\/[a-z0-9-]+$/.test(l.namespace))).toBe(
      true,
    );
    expect(gw[0]!.name).toContain('scope route');
    const gw2 = parse(
      (
        renderGateway(e, 'infra', 'gw2', 'c').values().next().value as unknown as {
          data: Record<string, string>;
        }
      ).data['limits.yaml']!,
    ) as LimitadorLimit[];
    expect(gw2[0]!.namespace).toBe('cascade:shared');
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
    ).toMatchObject({ scope: 'route' });
    // scope gateway: one namespace for every route of the gateway
    const e3 = standardEngine(
      [
        policy(
          'platform',
          'infra',
          { kind: 'Gateway', name: 'gw' },
          { defaults: { limits: { g: { ...rate(10), scope: 'gateway' } } } },
          RLP,
        ),
      ],
      rateLimitPolicyKind,
    );
    const gw3 = parse(
      (
        renderGateway(e3, 'infra', 'gw', 'c').values().next().value as unknown as {
          data: Record<string, string>;
        }
      ).data['limits.yaml']!,
    ) as LimitadorLimit[];
    expect(gw3.map((l) => l.namespace)).toEqual(['cascade:gateway/infra/gw']);
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
    const blocks = r3.actions.flatMap((a) => a.conditionalData ?? []);
    const byName = (n: string) =>
      blocks.find((b) =>
        limits.some(
          (l) => l.name.startsWith(`${n} `) && l.conditions[0]!.includes(b.data[0]!.expression.key),
        ),
      )!;
    expect(byName('global').predicates).toEqual(['request.method == "GET"']);
    // the writing policy's top-level when first, then the limit's own (Kuadrant's order)
    expect(byName('mine').predicates).toEqual(['request.host == "r3"', 'request.path == "/x"']);
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
    expect(limits[0]).toMatchObject({ max_value: 1000, variables: [], namespace: 'app/r3' });
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
