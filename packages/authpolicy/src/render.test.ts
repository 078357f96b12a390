// Authorino AuthConfig rendering, from the semantics: per route, effective rules only, predicates of
// each rule's own policy, hosts, and the cross-namespace Secret rule.
import { type ReferenceGrant, renderGateway } from '@cascade/core';
import { policy, standardEngine } from '@cascade/core/testing';
import { describe, expect, it } from 'vitest';
import { authPolicyKind } from './kind.ts';
import { secretReferences } from './render.ts';

const AP = { kind: 'AuthPolicy' };
const apiKey = {
  apiKey: { selector: { matchLabels: { app: 'keys' } } },
  credentials: { authorizationHeader: { prefix: 'APIKEY' } },
};
const jwt = { jwt: { issuerUrl: 'https://sso.example.com' } };
/** The platform team's gateway default: API keys, whose Secrets live in infra. */
const platformKeys = () =>
  policy(
    'platform',
    'infra',
    { kind: 'Gateway', name: 'gw' },
    { defaults: { rules: { authentication: { keys: apiKey } } } },
    AP,
  );
const grant = (from: string): ReferenceGrant => ({
  namespace: 'infra',
  name: 'g',
  from: [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', namespace: from }],
  to: [{ group: '', kind: 'Secret' }],
});

type AC = {
  metadata: { name: string; namespace: string; annotations: Record<string, string> };
  // biome-ignore lint/suspicious/noExplicitAny: navigating a rendered AuthConfig
  spec: Record<string, any>;
};
function configs(policies: ReturnType<typeof policy>[], grants: ReferenceGrant[] = []): AC[] {
  const e = standardEngine(policies, authPolicyKind);
  return [
    ...renderGateway(e, 'infra', 'gw', 'authpolicy-controller', undefined, grants).values(),
  ] as unknown as AC[];
}
const of = (cs: AC[], route: string) =>
  cs.filter((c) => c.metadata.annotations['cascade.dev/route'] === `HTTPRoute/app/${route}`);

describe('AuthPolicy -> Authorino AuthConfig', () => {
  it('one AuthConfig per route with its effective rules, hostnames and an id host', () => {
    const cs = configs([
      policy(
        'own',
        'app',
        { kind: 'HTTPRoute', name: 'r1' },
        { rules: { authentication: { sso: jwt } } },
        AP,
      ),
    ]);
    expect(cs).toHaveLength(1);
    const [c] = cs;
    expect(c!.metadata).toMatchObject({
      name: expect.stringMatching(/^r1-gw-[0-9a-f]{10}$/),
      namespace: 'app',
    });
    expect(c!.metadata.annotations['cascade.dev/route-rules']).toBe('read,rule-2');
    expect(c!.spec).toEqual({
      hosts: ['api.example.com', expect.stringMatching(/^[0-9a-f]{20}\.authconfig\.cascade\.internal$/)],
      authentication: { sso: jwt },
    });
  });

  it("a gateway default's API-key selector is refused in a team's route without a ReferenceGrant: fail closed", () => {
    const cs = configs([platformKeys()]);
    const [c] = of(cs, 'r3');
    expect(c!.metadata.namespace).toBe('app');
    expect(c!.spec.authentication).toBeUndefined();
    expect(c!.spec.authorization['cascade-refused-reference']).toEqual({
      patternMatching: { patterns: [{ predicate: 'false' }] },
    });
    expect(c!.spec.response.unauthorized.code).toBe(403);
    expect(c!.metadata.annotations['cascade.dev/refused-references']).toBe(
      'authentication.keys from infra/platform references Secrets (apiKey.selector) in infra, and no ReferenceGrant in infra allows HTTPRoutes in app to reference Secrets',
    );
  });

  it('with a ReferenceGrant in infra the AuthConfig is placed in infra, where the Secrets are (never copied)', () => {
    const cs = configs([platformKeys()], [grant('app')]);
    const [c] = of(cs, 'r3');
    expect(c!.metadata).toMatchObject({
      name: expect.stringMatching(/^r3-gw-[0-9a-f]{10}$/),
      namespace: 'infra',
    });
    expect(c!.metadata.annotations['cascade.dev/route']).toBe('HTTPRoute/app/r3');
    expect(c!.spec.authentication).toEqual({ keys: apiKey });
    expect(c!.metadata.annotations['cascade.dev/refused-references']).toBeUndefined();
    // A grant for another namespace does not count.
    expect(of(configs([platformKeys()], [grant('other')]), 'r3')[0]!.metadata.namespace).toBe('app');
  });

  it("Secrets from the route's own namespace and a granted one cannot share one AuthConfig: the foreign rule is refused", () => {
    const cs = configs(
      [
        policy(
          'platform',
          'infra',
          { kind: 'Gateway', name: 'gw' },
          { defaults: { strategy: 'merge', rules: { authentication: { keys: apiKey } } } },
          AP,
        ),
        policy(
          'own',
          'app',
          { kind: 'HTTPRoute', name: 'r3' },
          {
            rules: {
              metadata: { user: { http: { url: 'https://u', sharedSecretRef: { name: 's', key: 'k' } } } },
            },
          },
          AP,
        ),
      ],
      [grant('app')],
    );
    const [c] = of(cs, 'r3');
    expect(c!.metadata.namespace).toBe('app');
    expect(c!.spec.metadata.user).toBeDefined();
    expect(c!.spec.authentication).toBeUndefined();
    expect(c!.metadata.annotations['cascade.dev/refused-references']).toContain(
      'one AuthConfig resolves Secrets in one namespace',
    );
  });

  it("each evaluator carries its own policy's predicates: the route policy's `when` does not gate the default", () => {
    const cs = configs([
      policy(
        'platform',
        'infra',
        { kind: 'Gateway', name: 'gw' },
        {
          defaults: {
            strategy: 'merge',
            rules: {
              authorization: {
                admins: {
                  opa: { rego: 'allow = true' },
                  when: [{ predicate: 'request.path.startsWith("/admin")' }],
                },
              },
            },
            when: [{ predicate: 'request.method != "OPTIONS"' }],
          },
        },
        AP,
      ),
      policy(
        'own',
        'app',
        { kind: 'HTTPRoute', name: 'r3' },
        { rules: { authentication: { sso: jwt } }, when: [{ predicate: 'request.host == "r3"' }] },
        AP,
      ),
    ]);
    const [c] = of(cs, 'r3');
    expect(c!.spec.authorization.admins.when).toEqual([
      { predicate: 'request.path.startsWith("/admin")' },
      { predicate: 'request.method != "OPTIONS"' },
    ]);
    expect(c!.spec.authentication.sso.when).toEqual([{ predicate: 'request.host == "r3"' }]);
  });

  it("one policy's top-level `when` shared by every rule gates the auth action, not the AuthConfig (Kuadrant's form)", () => {
    const cs = configs([
      policy(
        'own',
        'app',
        { kind: 'HTTPRoute', name: 'r3' },
        {
          rules: {
            authentication: { sso: jwt },
            authorization: {
              admins: { opa: { rego: 'allow = true' }, when: [{ predicate: 'request.path == "/a"' }] },
            },
          },
          when: [{ predicate: 'request.method != "OPTIONS"' }],
        },
        AP,
      ),
    ]);
    const [c] = of(cs, 'r3');
    // the auth action's predicates hold it (wasm-shim does not call Authorino otherwise)
    expect(c!.spec.when).toBeUndefined();
    expect(c!.spec.authentication.sso.when).toBeUndefined();
    expect(c!.spec.authorization.admins.when).toEqual([{ predicate: 'request.path == "/a"' }]);
  });

  it('rules that resolve differently split the route into one AuthConfig per group; patterns become lists', () => {
    const cs = configs([
      policy(
        'own',
        'app',
        { kind: 'HTTPRoute', name: 'r1' },
        { rules: { authentication: { sso: jwt } } },
        AP,
      ),
      policy(
        'read-only',
        'app',
        { kind: 'HTTPRoute', name: 'r1', sectionName: 'read' },
        { patterns: { get: { allOf: [{ selector: 'request.method', operator: 'eq', value: 'GET' }] } } },
        AP,
      ),
    ]);
    const r1 = of(cs, 'r1');
    expect(r1.map((c) => c.metadata.name.replace(/-[0-9a-f]{10}$/, '')).sort()).toEqual([
      'r1-gw-read',
      'r1-gw-rule-2',
    ]);
    const read = r1.find((c) => c.metadata.name.startsWith('r1-gw-read-'))!;
    expect(read.spec.patterns).toEqual({
      get: [{ selector: 'request.method', operator: 'eq', value: 'GET' }],
    });
    expect(read.spec.hosts).toEqual([
      'api.example.com',
      expect.stringMatching(/^[0-9a-f]{20}\.authconfig\.cascade\.internal$/),
    ]);
    const other = r1.find((c) => c.metadata.name.startsWith('r1-gw-rule-2-'))!;
    expect(other.spec.hosts).toEqual([
      expect.stringMatching(/^[0-9a-f]{20}\.authconfig\.cascade\.internal$/),
    ]);
    expect(other.spec.hosts).not.toEqual(read.spec.hosts.slice(1));
  });

  it('finds Secret references wherever Authorino takes them', () => {
    expect(secretReferences(apiKey)).toEqual(['apiKey.selector']);
    expect(secretReferences({ x509: { selector: {} } })).toEqual(['x509.selector']);
    expect(secretReferences({ oauth2Introspection: { credentialsRef: { name: 'c' } } })).toEqual([
      'oauth2Introspection.credentialsRef',
    ]);
    expect(secretReferences({ wristband: { signingKeyRefs: [{ name: 'k' }] } })).toEqual([
      'wristband.signingKeyRefs',
    ]);
    expect(secretReferences(jwt)).toEqual([]);
    // a `selector` outside apiKey/x509 (e.g. a pattern selector) is not a Secret reference
    expect(
      secretReferences({ patternMatching: { patterns: [{ selector: 'a', operator: 'eq', value: 'b' }] } }),
    ).toEqual([]);
  });

  it('fails closed: while an AuthPolicy reaching the route is invalid (a CEL typo), its AuthConfig denies everything', () => {
    const typo = policy(
      'own',
      'app',
      { kind: 'HTTPRoute', name: 'r1' },
      { rules: { authentication: { sso: { ...jwt, when: [{ predicate: 'request.path ==' }] } } } },
      AP,
    );
    const [c] = of(configs([typo]), 'r1');
    expect(c, 'the route keeps an AuthConfig').toBeDefined();
    expect(c!.spec.authorization).toEqual({
      'cascade-invalid-policy': { patternMatching: { patterns: [{ predicate: 'false' }] } },
    });
    expect(c!.spec.authentication).toBeUndefined();
    expect(c!.spec.response.unauthorized.code).toBe(403);
    expect(c!.metadata.annotations['cascade.dev/invalid-policies']).toBe('app/own');
    // a gateway-level invalid policy closes every route of the gateway; the valid route policy is not served
    const gwTypo = policy(
      'platform',
      'infra',
      { kind: 'Gateway', name: 'gw' },
      { defaults: { rules: { authentication: { sso: { ...jwt, when: [{ predicate: '(' }] } } } } },
      AP,
    );
    const own = policy(
      'own',
      'app',
      { kind: 'HTTPRoute', name: 'r1' },
      { rules: { authentication: { sso: jwt } } },
      AP,
    );
    const cs = configs([gwTypo, own]);
    expect(cs.length).toBeGreaterThan(1);
    for (const ac of cs)
      expect(ac.metadata.annotations['cascade.dev/invalid-policies']).toBe('infra/platform');
    // fixed: the route's own rules are served again
    const [fixed] = of(configs([own]), 'r1');
    expect(fixed!.spec.authentication).toEqual({ sso: jwt });
    expect(fixed!.metadata.annotations['cascade.dev/invalid-policies']).toBeUndefined();
  });
});

describe('rendered names', () => {
  it('no two (route, gateway) pairs share an AuthConfig, whatever their names (property, random names)', () => {
    const alphabet = 'ab.-';
    let seed = 7;
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    const name = () => {
      let s = 'a';
      for (let i = rnd(6); i > 0; i--) s += alphabet[rnd(alphabet.length)];
      return `${s}a`;
    };
    const seen = new Map<string, string>();
    for (let i = 0; i < 3000; i++) {
      const tuple = [`ns${rnd(3)}`, name(), `gns${rnd(3)}`, name()] as const;
      const id = tuple.join('|');
      const ctx = {
        gateway: { namespace: tuple[2], name: tuple[3] },
        controller: 'c',
        referenceGrants: [],
        paths: [
          {
            path: {
              gatewayClass: 'c',
              gateway: { namespace: tuple[2], name: tuple[3] },
              listener: 'l',
              route: { kind: 'HTTPRoute', namespace: tuple[0], name: tuple[1] },
              rule: 'rule-1',
            },
            hostnames: ['*'],
            result: {
              rules: new Map([
                [
                  'authentication.a',
                  {
                    key: 'authentication.a',
                    section: 'authentication',
                    name: 'a',
                    value: jwt,
                    source: { kind: 'AuthPolicy', namespace: tuple[0], name: 'p' },
                    as: 'intent',
                    level: 3,
                    replaced: [],
                  },
                ],
              ]),
              lost: [],
              steps: [],
              refusedUnsets: [],
              conditionErrors: [],
              sources: [],
              invalid: [],
            },
          },
        ],
      };
      // biome-ignore lint/suspicious/noExplicitAny: a hand-built render context
      const [o] = authPolicyKind.render!(ctx as any);
      const k = `${o!.metadata.namespace}/${o!.metadata.name}`;
      const host = (o!.spec as { hosts: string[] }).hosts.at(-1)!;
      for (const key of [k, host]) {
        const prev = seen.get(key);
        if (prev !== undefined) expect(prev, `${key} rendered for ${prev} and ${id}`).toBe(id);
        seen.set(key, id);
      }
      expect(o!.metadata.name).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/);
      for (const v of Object.values(o!.metadata.labels ?? {}))
        expect(v).toMatch(/^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/);
    }
  });

  it('a 253-character route name and gateway name give valid names and label values', () => {
    const long = `r${'x'.repeat(251)}z`;
    const own = policy(
      'own',
      'app',
      { kind: 'HTTPRoute', name: long },
      { rules: { authentication: { sso: jwt } } },
      AP,
    );
    const e = standardEngine([own], authPolicyKind);
    e.upsertRoute({
      kind: 'HTTPRoute',
      namespace: 'app',
      name: long,
      parentRefs: [{ name: 'gw', namespace: 'infra' }],
      rules: [{}],
    });
    e.flush();
    const [o] = [...renderGateway(e, 'infra', 'gw', 'c').values()].filter(
      (x) => x.metadata.annotations?.['cascade.dev/route'] === `HTTPRoute/app/${long}`,
    );
    expect(o).toBeDefined();
    expect(o!.metadata.name.length).toBeLessThanOrEqual(253);
    for (const v of Object.values(o!.metadata.labels ?? {})) expect(v.length).toBeLessThanOrEqual(63);
  });
});
