import { PolicyEngine } from '@cascade/core';
import { describe, expect, it } from 'vitest';
import { authPolicyKind } from './kind.ts';

const gw = { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'gw' };
const errorsOf = (spec: unknown) => {
  const e = new PolicyEngine(authPolicyKind);
  e.upsertPolicy({ kind: 'AuthPolicy', metadata: { namespace: 'ns', name: 'p' }, spec });
  return e.policy('AuthPolicy:ns/p')!.errors;
};

describe('AuthPolicy schema', () => {
  it('accepts a Kuadrant v1 style spec with every section', () => {
    expect(
      errorsOf({
        targetRef: gw,
        defaults: {
          strategy: 'merge',
          rules: {
            authentication: {
              'api-key': {
                apiKey: { selector: { matchLabels: { app: 'x' } } },
                credentials: { authorizationHeader: { prefix: 'APIKEY' } },
              },
            },
            metadata: { user: { http: { url: 'http://users/{auth.identity.sub}' } } },
            authorization: {
              admins: { patternMatching: { patterns: [{ predicate: 'true' }] }, priority: 1 },
            },
            response: {
              unauthenticated: { code: 401, message: { value: 'no' } },
              success: { headers: { 'x-user': { plain: { expression: 'auth.identity.sub' } } } },
            },
            callbacks: { audit: { http: { url: 'http://audit' } } },
          },
          patterns: { 'is-get': { allOf: [{ selector: 'request.method', operator: 'eq', value: 'GET' }] } },
        },
      }),
    ).toEqual([]);
  });

  it("takes Kuadrant's whole condition language in evaluators: expressions, patternRef, predicate, all/any", () => {
    const when = [
      { selector: 'auth.identity.group', operator: 'incl', value: 'admins' },
      { patternRef: 'is-get' },
      { predicate: "request.path.startsWith('/admin')" },
      {
        any: [
          { patternRef: 'is-get' },
          { all: [{ predicate: 'true' }, { selector: 'a', operator: 'neq', value: 'b' }] },
        ],
      },
    ];
    expect(
      errorsOf({
        targetRef: gw,
        rules: {
          authentication: { anon: { anonymous: {}, when } },
          authorization: { admins: { patternMatching: { patterns: when } } },
        },
        patterns: { 'is-get': { allOf: [{ selector: 'request.method', operator: 'eq', value: 'GET' }] } },
      }),
    ).toEqual([]);
  });

  it('refuses what Authorino would drop or misread, naming the field', () => {
    // a predicate in a named pattern (Authorino's named patterns hold selector/operator/value only)
    expect(
      errorsOf({ targetRef: gw, patterns: { p: { allOf: [{ predicate: 'true' }] } } }).join('\n'),
    ).toMatch(/spec\.patterns\.p\.allOf\.0: unknown field\(s\) "predicate"/);
    // two forms in one item, an unknown operator, a CEL typo deep inside any/all
    const bad = (when: unknown[]) =>
      errorsOf({ targetRef: gw, rules: { authentication: { a: { anonymous: {}, when } } } }).join('\n');
    expect(bad([{ predicate: 'true', patternRef: 'x' }])).toMatch(/spec\.rules\.authentication\.a\.when\.0/);
    expect(bad([{ selector: 'a', operator: 'like', value: 'b' }])).toMatch(/when\.0/);
    expect(bad([{ any: [{ all: [{ predicate: 'request.path ==' }] }] }])).toMatch(
      /when\[0\]\.any\[0\]\.all\[0\]\.predicate: CEL/,
    );
    // nesting is bounded
    let deep: unknown = { predicate: 'true' };
    for (let i = 0; i < 5; i++) deep = { all: [deep] };
    expect(bad([deep])).toMatch(/when\.0/);
    // patternMatching needs at least one pattern
    expect(
      errorsOf({
        targetRef: gw,
        rules: { authorization: { z: { patternMatching: { patterns: [] } } } },
      }).join('\n'),
    ).toMatch(/spec\.rules\.authorization\.z\.patternMatching\.patterns/);
  });

  it('requires exactly one method per evaluator', () => {
    expect(
      errorsOf({ targetRef: gw, rules: { authentication: { a: { jwt: {}, apiKey: {} }, b: {} } } }),
    ).toEqual([
      'spec.rules.authentication.a: sets apiKey and jwt; exactly one is allowed',
      'spec.rules.authentication.b: needs one of apiKey, jwt, kubernetesTokenReview, oauth2Introspection, x509, plain, anonymous',
    ]);
  });

  it('rejects unknown evaluator fields and bad predicates', () => {
    expect(errorsOf({ targetRef: gw, rules: { authorization: { a: { opa: {}, bogus: 1 } } } })[0]).toContain(
      'unknown field(s) "bogus"',
    );
    expect(errorsOf({ targetRef: gw, when: [{ predicate: '(((' }], rules: {} })[0]).toContain(
      'spec.when[0].predicate: CEL does not parse',
    );
  });

  it('splits response into fixed slots and named headers/filters as rule keys', () => {
    const e = new PolicyEngine(authPolicyKind);
    e.upsertGateway({ namespace: 'ns', name: 'gw', gatewayClassName: 'c', listeners: [{ name: 'l' }] });
    e.upsertRoute({
      kind: 'HTTPRoute',
      namespace: 'ns',
      name: 'r',
      parentRefs: [{ name: 'gw' }],
      rules: [{}],
    });
    e.upsertPolicy({
      kind: 'AuthPolicy',
      metadata: { namespace: 'ns', name: 'p' },
      spec: {
        targetRef: gw,
        rules: {
          response: {
            unauthorized: { code: 403 },
            success: { headers: { h: { json: {} } }, filters: { f: { plain: {} } } },
          },
        },
      },
    });
    e.flush();
    expect([...e.result('Gateway:ns/gw#l|HTTPRoute:ns/r#rule-1')!.rules.keys()]).toEqual([
      'response.success.filters.f',
      'response.success.headers.h',
      'response.unauthorized',
    ]);
  });

  it('an authentication override replaces every lower method even with strategy merge (no escape by adding one)', () => {
    const e = new PolicyEngine(authPolicyKind);
    e.upsertGateway({ namespace: 'ns', name: 'gw', gatewayClassName: 'c', listeners: [{ name: 'l' }] });
    e.upsertRoute({
      kind: 'HTTPRoute',
      namespace: 'ns',
      name: 'r',
      parentRefs: [{ name: 'gw' }],
      rules: [{}],
    });
    const jwt = { jwt: { issuerUrl: 'https://issuer.example' } };
    e.upsertPolicy({
      kind: 'AuthPolicy',
      metadata: { namespace: 'ns', name: 'platform' },
      spec: { targetRef: gw, overrides: { strategy: 'merge', rules: { authentication: { sso: jwt } } } },
    });
    e.upsertPolicy({
      kind: 'AuthPolicy',
      metadata: { namespace: 'ns', name: 'tenant' },
      spec: {
        targetRef: { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'r' },
        rules: {
          authentication: { anyone: { anonymous: {} } },
          authorization: {
            mine: { patternMatching: { patterns: [{ selector: 'a', operator: 'eq', value: 'b' }] } },
          },
        },
      },
    });
    e.flush();
    const rules = e.result('Gateway:ns/gw#l|HTTPRoute:ns/r#rule-1')!.rules;
    // only the override's method authenticates; the tenant's other sections are merged as usual
    expect([...rules.keys()].filter((k) => k.startsWith('authentication.'))).toEqual(['authentication.sso']);
    expect(rules.has('authorization.mine')).toBe(true);
  });
});
