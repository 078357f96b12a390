// Golden tests on examples/gateway. Expectations are written from the D/O semantics and the example
// story (see examples/gateway/*.yaml), not copied from output.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { run } from './run.ts';

const EX = resolve(import.meta.dirname, '../../../examples/gateway');
const src = (kind: string, namespace: string, name: string) => ({ kind, namespace, name });
const RLP = 'RateLimitPolicy';
const AP = 'AuthPolicy';

describe('cascadectl effective -o json on examples/gateway', async () => {
  const r = await run('effective', EX, '-o', 'json');
  const results = JSON.parse(r.stdout) as {
    policyKind: string;
    path: Record<string, string>;
    rules: Record<string, { value: unknown; source: unknown; as: string; context?: unknown }>;
    overridden: unknown[];
  }[];
  const at = (kind: string, route: string, rule: string) =>
    results.find((x) => x.policyKind === kind && x.path.route === route && x.path.rule === rule)!;

  it('exits 0 and prints one result per (kind, path): 5 paths x 2 kinds (no TokenRateLimitPolicy here)', () => {
    expect(r.code).toBe(0);
    expect(results).toHaveLength(10);
    expect(at(RLP, 'team-a/catalog', 'browse').path).toEqual({
      gatewayClass: 'cascade',
      gateway: 'infra/main',
      listener: 'https',
      routeKind: 'HTTPRoute',
      route: 'team-a/catalog',
      rule: 'browse',
    });
  });

  it('a route without policies gets the merged 100/min default', () => {
    expect(at(RLP, 'team-a/catalog', 'browse').rules).toEqual({
      // Every limit counts per route unless it says otherwise (as kuadrant-operator counts): explicit.
      'limits.global': {
        value: { rates: [{ limit: 100, window: '1m' }], scope: 'route' },
        source: src(RLP, 'infra', 'platform-limits'),
        as: 'default',
      },
    });
  });

  it('a route limit above the cap is clipped to 1000/min, keeping its counters, own predicates and the rates within the cap', () => {
    const o = at(RLP, 'team-b/orders', 'checkout');
    expect(o.rules['limits.per-user']).toEqual({
      // Still team-b's route-level rule (clipped): its counter stays per route. Its 5000/1m is above
      // the cap and goes; its 50000/1h is 833/min, within the cap, and stays.
      value: {
        rates: [
          { limit: 50000, window: '1h' },
          { limit: 1000, window: '1m' },
        ],
        counters: [{ expression: 'auth.identity.userid' }],
        scope: 'route',
      },
      source: src(RLP, 'infra', 'platform-cap'),
      as: 'override',
      context: { when: [{ predicate: 'request.method == "POST"' }] },
    });
    expect(o.rules['limits.global']?.source).toEqual(src(RLP, 'infra', 'platform-limits'));
    expect(o.overridden).toEqual([
      {
        rule: 'limits.per-user',
        source: src(RLP, 'team-b', 'orders-per-user'),
        as: 'intent',
        by: [src(RLP, 'infra', 'platform-cap')],
        reason: 'clipped',
      },
    ]);
  });

  it('an unset default is gone from the route that unset it', () => {
    expect(at(RLP, 'team-c/status', 'rule-1').rules).toEqual({});
  });

  it('a route replaces the default authentication by name; the anonymous-access override stays everywhere', () => {
    const a = at(AP, 'team-a/catalog', 'search');
    expect(Object.keys(a.rules).sort()).toEqual(['authentication.primary', 'authorization.deny-anonymous']);
    expect(a.rules['authentication.primary']?.source).toEqual(src(AP, 'team-a', 'catalog-jwt'));
    expect(a.rules['authorization.deny-anonymous']?.as).toBe('override');
    const d = at(AP, 'team-d/admin', 'rule-1');
    expect(d.rules['authorization.deny-anonymous']?.source).toEqual(src(AP, 'infra', 'platform-auth'));
  });

  it('--kind filters', async () => {
    const only = JSON.parse(
      (await run('effective', EX, '--kind', 'AuthPolicy', '-o', 'json')).stdout,
    ) as unknown[];
    expect(only).toHaveLength(5);
  });
});

describe('cascadectl status on examples/gateway', async () => {
  const r = await run('status', EX, '-o', 'json');
  const report = JSON.parse(r.stdout) as {
    policies: {
      kind: string;
      namespace: string;
      name: string;
      conditions: { type: string; status: string; reason: string; message: string }[];
    }[];
    targets: {
      kind: string;
      namespace: string;
      name: string;
      conditions: { type: string; status: string; reason: string }[];
    }[];
  };
  const cond = (name: string, type: string) =>
    report.policies.find((p) => p.name === name)!.conditions.find((c) => c.type === type)!;

  it('refuses the unset of an override and says so', () => {
    expect(cond('admin-open', 'Enforced').message).toContain(
      'unset of authorization.deny-anonymous refused: an override of infra/platform-auth cannot be unset',
    );
  });

  it('names who beat whom', () => {
    expect(cond('platform-auth', 'Enforced')).toMatchObject({ status: 'True', reason: 'PartiallyEnforced' });
    expect(cond('platform-auth', 'Enforced').message).toContain(
      'authentication.primary by team-a/catalog-jwt (routes team-a/catalog)',
    );
    expect(cond('orders-per-user', 'Enforced').message).toContain(
      'limits.per-user (clipped) by infra/platform-cap',
    );
    expect(cond('platform-limits', 'Enforced').message).toContain(
      'limits.global (unset) by team-c/status-unlimited',
    );
    expect(cond('platform-limits', 'Accepted').message).toContain('also targeted by infra/platform-cap');
  });

  it('sets <Kind>Affected on targets', () => {
    const t = (name: string) =>
      report.targets.find((x) => x.name === name)!.conditions.map((c) => `${c.type}=${c.reason}`);
    // a route is affected by what it inherits from its gateway too (the platform's gateway defaults)
    // no TokenRateLimitPolicy in these examples: every target is unaffected by that kind
    const both = [
      'AuthPolicyAffected=Affected',
      'RateLimitPolicyAffected=Affected',
      'TokenRateLimitPolicyAffected=Unaffected',
    ];
    expect(t('main')).toEqual(both);
    expect(t('catalog')).toEqual(both);
    expect(t('status')).toEqual(both);
  });
});

describe('cascadectl explain', () => {
  it('shows the chain and why each rule won or lost', async () => {
    const r = await run('explain', EX, '--route', 'team-b/orders', '--kind', 'RateLimitPolicy');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('team-b/orders-per-user (Route)');
    expect(r.stdout).toContain('infra/platform-cap override merge: applied - constraint clipped 1 rule(s)');
    expect(r.stdout).toContain('lost: team-b/orders-per-user (intent) clipped by infra/platform-cap');
  });

  it('answers the reverse question: which policies and levels an AuthConfig, a limit or a set comes from', async () => {
    const ac = await run('explain', EX, '--authconfig', 'infra/admin-main-9d0434dd60');
    expect(ac.code).toBe(0);
    expect(ac.stdout).toMatch(
      /^AuthConfig infra\/admin-main-9d0434dd60 carries HTTPRoute\/team-d\/admin \(rule-1\) through gateway infra\/main, from team-d\/admin-open,infra\/platform-auth/,
    );
    expect(ac.stdout).toContain('authorization.deny-anonymous = ');
    expect(ac.stdout).toContain('WON: infra/platform-auth (override)');
    expect(ac.stdout).not.toContain('RateLimitPolicy  ');
    const lim = await run('explain', EX, '--limit', 'team-b/orders');
    expect(lim.code).toBe(0);
    expect(lim.stdout).toContain(
      '1000 per 60s: per-user[1] from RateLimitPolicy infra/platform-cap (override), scope route',
    );
    expect(lim.stdout).toContain('RateLimitPolicy  infra/main#https > HTTPRoute team-b/orders > checkout');
    const set = 'HTTPRoute/team-b/orders#checkout[0]@orders.apps.example.com|1654a2a3647fd103';
    const s = await run('explain', EX, '--set', set);
    expect(s.code).toBe(0);
    expect(s.stdout).toContain(
      `action set ${set} of gateway infra/main: HTTPRoute/team-b/orders checkout (listener https)`,
    );
    expect(s.stdout).toContain('AuthPolicy  infra/main#https > HTTPRoute team-b/orders > checkout');
    const none = await run('explain', EX, '--authconfig', 'infra/nope');
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('no authconfig infra/nope in the input');
    expect((await run('explain', EX, '--set', set, '--route', 'team-b/orders')).code).toBe(2);
  });

  it('the AuthConfig says which policy, level and role wrote each rule', async () => {
    const r = await run('render', EX, '-o', 'json');
    const acs = (
      JSON.parse(r.stdout) as {
        kind: string;
        metadata: { name: string; annotations: Record<string, string> };
      }[]
    ).filter((o) => o.kind === 'AuthConfig');
    const admin = acs.find((o) => o.metadata.name === 'admin-main-9d0434dd60')!;
    expect(JSON.parse(admin.metadata.annotations['cascade.dev/rule-sources']!)).toEqual({
      'authentication.anonymous': 'AuthPolicy team-d/admin-open (Route, intent)',
      'authentication.primary': 'AuthPolicy infra/platform-auth (Gateway, default)',
      'authorization.deny-anonymous': 'AuthPolicy infra/platform-auth (Gateway, override)',
    });
  });
});

describe('cascadectl errors', () => {
  it('an unknown flag exits 2 naming it', async () => {
    const r = await run('effective', EX, '--bogus');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/Unknown option '--bogus'/);
  });

  it('an unknown command exits 2', async () => {
    const r = await run('frobnicate');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unknown command "frobnicate"');
  });

  it('a bad -o value exits 2', async () => {
    const r = await run('effective', EX, '-o', 'xml');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--output must be one of table, wide, yaml, json, name (got "xml")');
  });

  it('explain without --route exits 2', async () => {
    expect((await run('explain', EX)).code).toBe(2);
  });

  it('-h prints usage and exits 0 on every command', async () => {
    for (const c of ['effective', 'status', 'explain']) {
      const r = await run(c, '-h');
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/^usage: cascadectl /);
    }
  });

  it('malformed documents are reported with file, document and field; the rest is processed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cascadectl-'));
    const f = join(dir, 'bad.yaml');
    writeFileSync(
      f,
      [
        'apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: broken, namespace: infra}\nspec: {listeners: []}',
        'kind: Frob\nmetadata: {name: x}',
        'apiVersion: cascade.dev/v1alpha1\nkind: RateLimitPolicy\nmetadata: {name: bad, namespace: team-a}\nspec: {targetRef: {kind: HTTPRoute, name: catalog}, limits: {x: {rates: [{limit: 1, window: forever}]}}}',
        'key: [unclosed',
        'apiVersion: v1\nkind: List\nitems:\n- kind: Namespace\n  metadata: {name: listed}',
      ].join('\n---\n'),
    );
    const r = await run('status', EX, f, '-o', 'json');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${f}: document 1 (Gateway broken): spec.gatewayClassName:`);
    expect(r.stderr).toContain(`note: ${f}: document 2: ignoring unknown kind Frob`);
    expect(r.stderr).toMatch(new RegExp(`${f}: document 4: YAML: `));
    const report = JSON.parse(r.stdout) as {
      policies: { name: string; conditions: { reason: string; message: string }[] }[];
    };
    const bad = report.policies.find((p) => p.name === 'bad')!;
    expect(bad.conditions[0]!.reason).toBe('Invalid');
    expect(bad.conditions[0]!.message).toContain('spec.limits.x.rates.0.window: must be a duration like 1m');
    expect(report.policies.filter((p) => p.conditions[0]!.reason === 'Accepted')).toHaveLength(7);
  });

  it('a missing file exits 2 naming it', async () => {
    const r = await run('effective', '/nonexistent/x.yaml');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('/nonexistent/x.yaml: cannot read: ENOENT');
  });
});

describe('an invalid AuthPolicy fails closed, and every view shows the deny-all in force', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cascadectl-'));
  const f = join(dir, 'typo.yaml');
  writeFileSync(
    f,
    'apiVersion: cascade.dev/v1alpha1\nkind: AuthPolicy\nmetadata: {name: orders-typo, namespace: team-b}\nspec:\n  targetRef: {group: gateway.networking.k8s.io, kind: HTTPRoute, name: orders}\n  rules: {authorization: {admins: {patternMatching: {patterns: [{predicate: "auth.identity.group =="}]}}}}\n',
  );

  it('effective: the route has only the deny-all, written by the invalid policy; what it replaced is listed', async () => {
    const r = await run('effective', EX, f, '--kind', AP, '-o', 'json');
    const orders = (
      JSON.parse(r.stdout) as {
        path: { route: string };
        rules: Record<string, { source: unknown }>;
        overridden: { rule: string; reason: string }[];
      }[]
    ).find((x) => x.path.route === 'team-b/orders')!;
    expect(Object.keys(orders.rules)).toEqual(['authorization.cascade-invalid-policy']);
    expect(orders.rules['authorization.cascade-invalid-policy']!.source).toEqual(
      src(AP, 'team-b', 'orders-typo'),
    );
    expect(orders.overridden.map((o) => `${o.rule} ${o.reason}`).sort()).toEqual([
      'authentication.primary failed-closed',
      'authorization.deny-anonymous failed-closed',
    ]);
  });

  it('explain names the invalid policy and the fail-closed step; status names the closed route', async () => {
    const x = await run('explain', EX, f, '--kind', AP, '--route', 'team-b/orders');
    expect(x.stdout).toContain('team-b/orders-typo (invalid: not folded)');
    expect(x.stdout).toContain('FAIL CLOSED: team-b/orders-typo is invalid: it fails closed');
    const s = await run('status', EX, f);
    expect(s.stdout).toMatch(
      /AuthPolicy team-b\/orders-typo Enforced: Policy is not enforced: it is invalid and fails closed: every request on the path is denied \(403\) until it is fixed \(1 path\(s\), routes team-b\/orders\)/,
    );
    expect(s.stdout).toMatch(/HTTPRoute team-b\/orders +True\/FailedClosed/);
  });
});
