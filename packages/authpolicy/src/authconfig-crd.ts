// Authorino's AuthConfig CustomResourceDefinition (authorino.kuadrant.io/v1beta3) as a structural
// schema, for the tests (integration, cleanup, the cluster e2e): the Authorino Go module is not served
// by the Go module proxy this project builds from, so its CRD cannot be taken from a pinned module the
// way the Gateway API and the data-plane providers' CRDs are. Written from Authorino's API types
// (api/v1beta3/auth_config_types.go) and checked against its generated CRD: the same fields, the same
// required fields and enums, and x-kubernetes-preserve-unknown-fields exactly where Authorino has it
// (a `value` that is any JSON, and the nested `all`/`any` of a pattern expression). Everything else is
// pruned as the real CRD prunes it, so a field Authorino does not have (Kuadrant's `filters`, a
// `predicate` in a named pattern) disappears in the tests as it would in a cluster. Descriptions, and
// the real CRD's CEL rules that choose one method per evaluator, are left out. In a cluster, install
// Authorino's own CRD.

type Schema = Record<string, unknown>;

const str = (extra: Schema = {}): Schema => ({ type: 'string', ...extra });
const int = (extra: Schema = {}): Schema => ({ type: 'integer', ...extra });
const bool: Schema = { type: 'boolean' };
const list = (items: Schema): Schema => ({ type: 'array', items });
const map = (values: Schema): Schema => ({ type: 'object', additionalProperties: values });
const obj = (properties: Record<string, Schema>, required?: string[]): Schema => ({
  type: 'object',
  properties,
  ...(required ? { required } : {}),
});
const anyJson: Schema = { 'x-kubernetes-preserve-unknown-fields': true };
const timeout = int({ minimum: 0 });

const OPERATORS = ['eq', 'neq', 'incl', 'excl', 'matches'];

/** PatternExpression: selector, operator, value. */
const patternExpression = {
  selector: str(),
  operator: str({ enum: OPERATORS }),
  value: str(),
};

/** PatternExpressionOrRef: a pattern expression, a patternRef, a CEL predicate, or all/any of them. */
const patternExpressionOrRef = obj({
  ...patternExpression,
  patternRef: str(),
  predicate: str(),
  all: list({ type: 'object', ...anyJson }),
  any: list({ type: 'object', ...anyJson }),
});

/** ValueOrSelector: a static value (any JSON), a selector or a CEL expression. */
const valueOrSelector = obj({ value: anyJson, selector: str(), expression: str() });
const namedValues = map(valueOrSelector);

const common = {
  priority: int(),
  metrics: bool,
  when: list(patternExpressionOrRef),
  cache: obj({ key: valueOrSelector, ttl: int() }, ['key']),
};

const named = obj({ name: str() }, ['name']);
const credentials = obj({
  authorizationHeader: obj({ prefix: str() }),
  customHeader: named,
  queryString: named,
  cookie: named,
});

const labelSelector = obj({
  matchExpressions: list(obj({ key: str(), operator: str(), values: list(str()) }, ['key', 'operator'])),
  matchLabels: map(str()),
});
const localRef = obj({ name: str() });
const secretKeyRef = obj({ name: str(), key: str() }, ['key', 'name']);

const httpEndpoint = {
  url: str(),
  urlExpression: str(),
  method: str({ enum: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS', 'CONNECT', 'TRACE'] }),
  body: valueOrSelector,
  bodyParameters: namedValues,
  contentType: str({ enum: ['application/x-www-form-urlencoded', 'application/json'] }),
  headers: namedValues,
  sharedSecretRef: secretKeyRef,
  oauth2: obj(
    {
      tokenUrl: str(),
      clientId: str(),
      clientSecretRef: secretKeyRef,
      scopes: list(str()),
      extraParams: map(str()),
      cache: bool,
      timeout,
    },
    ['clientId', 'clientSecretRef', 'tokenUrl'],
  ),
  credentials,
  timeout,
};

const authentication = obj({
  ...common,
  credentials,
  overrides: namedValues,
  defaults: namedValues,
  apiKey: obj({ selector: labelSelector, allNamespaces: bool }, ['selector']),
  jwt: obj({ jwksUrl: str(), issuerUrl: str(), ttl: int(), timeout }),
  oauth2Introspection: obj({ endpoint: str(), tokenTypeHint: str(), credentialsRef: localRef, timeout }, [
    'credentialsRef',
    'endpoint',
  ]),
  kubernetesTokenReview: obj({ audiences: list(str()), timeout }),
  x509: obj(
    {
      selector: labelSelector,
      allNamespaces: bool,
      source: obj({ xfccHeader: str(), clientCertHeader: str(), expression: str() }),
    },
    ['selector'],
  ),
  plain: obj({ selector: str(), expression: str() }),
  anonymous: { type: 'object' },
});

const metadata = obj({
  ...common,
  http: obj(httpEndpoint),
  userInfo: obj({ identitySource: str(), userInfoUrl: str(), timeout }),
  uma: obj({ endpoint: str(), credentialsRef: localRef, timeout }, ['credentialsRef', 'endpoint']),
});

const spiceDBObject = obj({ name: valueOrSelector, kind: valueOrSelector });
const authorization = obj({
  ...common,
  patternMatching: obj({ patterns: list(patternExpressionOrRef) }, ['patterns']),
  opa: obj({
    rego: str(),
    externalPolicy: obj({ ...httpEndpoint, ttl: int() }),
    allValues: bool,
    version: str({ enum: ['v0', 'v1'] }),
  }),
  kubernetesSubjectAccessReview: obj({
    user: valueOrSelector,
    groups: list(str()),
    authorizationGroups: valueOrSelector,
    resourceAttributes: obj({
      group: valueOrSelector,
      resource: valueOrSelector,
      subresource: valueOrSelector,
      name: valueOrSelector,
      namespace: valueOrSelector,
      verb: valueOrSelector,
    }),
    timeout,
  }),
  spicedb: obj(
    {
      endpoint: str(),
      insecure: bool,
      sharedSecretRef: secretKeyRef,
      subject: spiceDBObject,
      resource: spiceDBObject,
      permission: valueOrSelector,
    },
    ['endpoint'],
  ),
});

const denyWith = obj({
  code: int({ format: 'int64', minimum: 300, maximum: 599 }),
  message: valueOrSelector,
  headers: namedValues,
  body: valueOrSelector,
});
const successResponse = obj({
  ...common,
  key: str(),
  plain: valueOrSelector,
  json: obj({ properties: namedValues }, ['properties']),
  wristband: obj(
    {
      issuer: str(),
      customClaims: namedValues,
      tokenDuration: int({ format: 'int64' }),
      signingKeyRefs: list(
        obj(
          { name: str(), algorithm: str({ enum: ['ES256', 'ES384', 'ES512', 'RS256', 'RS384', 'RS512'] }) },
          ['algorithm', 'name'],
        ),
      ),
    },
    ['issuer', 'signingKeyRefs'],
  ),
});

const callback = obj({ ...common, http: obj(httpEndpoint) }, ['http']);

const spec = obj(
  {
    hosts: list(str()),
    patterns: map(list(obj(patternExpression))),
    when: list(patternExpressionOrRef),
    authentication: map(authentication),
    metadata: map(metadata),
    authorization: map(authorization),
    response: obj({
      unauthenticated: denyWith,
      unauthorized: denyWith,
      success: obj({ headers: map(successResponse), dynamicMetadata: map(successResponse) }),
    }),
    callbacks: map(callback),
  },
  ['hosts'],
);

export const authConfigCrd = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: 'authconfigs.authorino.kuadrant.io' },
  spec: {
    group: 'authorino.kuadrant.io',
    names: { kind: 'AuthConfig', listKind: 'AuthConfigList', plural: 'authconfigs', singular: 'authconfig' },
    scope: 'Namespaced',
    versions: [
      {
        name: 'v1beta3',
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: {
          openAPIV3Schema: {
            type: 'object',
            properties: {
              spec,
              status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
            },
          },
        },
      },
    ],
  },
};
