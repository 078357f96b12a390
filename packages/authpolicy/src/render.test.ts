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
    expect(c!.metadata).toMatchObject({ name: 'r1.gw', namespace: 'app' });
    expect(c!.metadata.annotations['cascade.dev/route-rules']).toBe('read,rule-2');
    expect(c!.spec).toEqual({
      hosts: ['api.example.com', 'r1.gw.app.authconfig.cascade.internal'],
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
    expect(c!.metadata).toMatchObject({ name: 'app.r3.gw', namespace: 'infra' });
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
    expect(r1.map((c) => c.metadata.name).sort()).toEqual(['r1.gw.read', 'r1.gw.rule-2']);
    const read = r1.find((c) => c.metadata.name === 'r1.gw.read')!;
    expect(read.spec.patterns).toEqual({
      get: [{ selector: 'request.method', operator: 'eq', value: 'GET' }],
    });
    expect(read.spec.hosts).toEqual(['api.example.com', 'r1.gw.read.app.authconfig.cascade.internal']);
    const other = r1.find((c) => c.metadata.name === 'r1.gw.rule-2')!;
    expect(other.spec.hosts).toEqual(['r1.gw.rule-2.app.authconfig.cascade.internal']);
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
});
