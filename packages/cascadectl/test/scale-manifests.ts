// A large gateway cluster as YAML manifests, for the graph and report at scale (tests and
// `npm run bench -- cli`): the example platform (a Gateway with two listeners, platform defaults
// and overrides) and N routes in 50 team namespaces, each with two rules. Every 10th route brings
// its own RateLimitPolicy (a per-route limit), so most routes are identical in the picture.
export function scaleManifests(routes: number): string {
  const docs: string[] = [
    'apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: cascade}\nspec: {controllerName: cascade.dev/gateway}',
    `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: main, namespace: infra}
spec:
  gatewayClassName: cascade
  listeners:
    - {name: https, hostname: "*.apps.example.com", port: 443, protocol: HTTPS, allowedRoutes: {namespaces: {from: All}}}
    - {name: internal, hostname: "*.internal.example.com", port: 443, protocol: HTTPS, allowedRoutes: {namespaces: {from: All}}}`,
    `apiVersion: cascade.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: platform-limits, namespace: infra, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  targetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: main}
  defaults: {strategy: merge, limits: {global: {rates: [{limit: 100, window: 1m}]}}}`,
    `apiVersion: cascade.dev/v1alpha1
kind: AuthPolicy
metadata: {name: platform-auth, namespace: infra, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  targetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: main}
  overrides:
    strategy: merge
    rules: {authorization: {deny-anonymous: {patternMatching: {patterns: [{predicate: "!has(auth.identity.anonymous)"}]}}}}`,
  ];
  for (let r = 0; r < routes; r++) {
    const ns = `team-${r % 50}`;
    const listener = r % 4 === 0 ? 'internal' : 'https';
    docs.push(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: route-${r}, namespace: ${ns}, labels: {tier: ${r % 3 === 0 ? 'gold' : 'standard'}}}
spec:
  parentRefs: [{name: main, namespace: infra, sectionName: ${listener}}]
  hostnames: ["app${r}.${listener === 'internal' ? 'internal' : 'apps'}.example.com"]
  rules: [{name: read}, {name: write}]`);
    if (r % 10 === 0)
      docs.push(`apiVersion: cascade.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: route-${r}-limits, namespace: ${ns}, creationTimestamp: "2026-02-01T00:00:00Z"}
spec:
  targetRef: {group: gateway.networking.k8s.io, kind: HTTPRoute, name: route-${r}}
  limits: {per-route: {rates: [{limit: ${1000 + r}, window: 1m}]}}`);
  }
  return `${docs.join('\n---\n')}\n`;
}
