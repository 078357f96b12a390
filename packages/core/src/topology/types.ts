// Plain data for the Gateway API objects the engine reads, and the identifiers that tie them together.

export const GATEWAY_API_GROUP = 'gateway.networking.k8s.io';

export type RouteKind = 'HTTPRoute' | 'GRPCRoute';
export const ROUTE_KINDS: readonly RouteKind[] = ['HTTPRoute', 'GRPCRoute'];

/** Hierarchy levels, least specific first. A policy's level is the level of what it targets. */
export const Level = {
  GatewayClass: 0,
  Gateway: 1,
  Listener: 2,
  Route: 3,
  RouteRule: 4,
} as const;
export type Level = (typeof Level)[keyof typeof Level];

export interface GatewayClassObject {
  name: string;
  /** spec.controllerName: which data-plane provider runs the class's gateways. */
  controllerName?: string;
}

export interface AllowedRoutes {
  namespaces?: { from?: 'Same' | 'All' | 'Selector'; selector?: LabelSelector };
  kinds?: { group?: string; kind: string }[];
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: {
    key: string;
    operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
    values?: string[];
  }[];
}

export interface ListenerSpec {
  name: string;
  hostname?: string;
  port?: number;
  protocol?: string;
  allowedRoutes?: AllowedRoutes;
}

export interface GatewayObject {
  namespace: string;
  name: string;
  gatewayClassName: string;
  listeners: ListenerSpec[];
}

export interface ParentRef {
  group?: string;
  kind?: string;
  namespace?: string;
  name: string;
  sectionName?: string;
  port?: number;
}

/** A header or query-parameter match of a route rule (Gateway API; the type defaults to Exact). */
export interface ValueMatch {
  type: 'Exact' | 'RegularExpression';
  name: string;
  value: string;
}

/**
 * One match of a route rule, as plain data: an HTTPRouteMatch, or a GRPCRouteMatch whose method match
 * is in `grpc` (gRPC requests are HTTP/2 POSTs to `/<service>/<method>`).
 */
export interface RouteMatch {
  path?: { type: 'Exact' | 'PathPrefix' | 'RegularExpression'; value: string };
  method?: string;
  headers?: ValueMatch[];
  queryParams?: ValueMatch[];
  grpc?: { type: 'Exact' | 'RegularExpression'; service?: string; method?: string };
}

export interface RouteRuleSpec {
  name?: string;
  /** The rule's matches; absent or empty: every request (HTTPRoute: PathPrefix /). */
  matches?: RouteMatch[];
}

export interface RouteObject {
  kind: RouteKind;
  namespace: string;
  name: string;
  hostnames?: string[];
  parentRefs: ParentRef[];
  /** Unnamed rules are addressed as `rule-<n>`; matches matter to the data-plane wiring only. */
  rules: RouteRuleSpec[];
  /** metadata.creationTimestamp: Gateway API breaks match-precedence ties by the older route. */
  createdAt?: string;
}

export interface NamespaceObject {
  name: string;
  labels: Record<string, string>;
}

export interface NsName {
  namespace: string;
  name: string;
}

/** One path through the hierarchy: the unit an effective policy is computed for. */
export interface PathRef {
  gatewayClass: string;
  gateway: NsName;
  listener: string;
  route: { kind: RouteKind; namespace: string; name: string };
  rule: string;
}

export const gatewayKey = (namespace: string, name: string): string => `Gateway:${namespace}/${name}`;
export const routeKey = (kind: string, namespace: string, name: string): string =>
  `${kind}:${namespace}/${name}`;
export const classKey = (name: string): string => `GatewayClass:${name}`;
export const sectionKey = (objectKey: string, section: string): string => `${objectKey}#${section}`;

export function pathKey(p: PathRef): string {
  return `${gatewayKey(p.gateway.namespace, p.gateway.name)}#${p.listener}|${routeKey(p.route.kind, p.route.namespace, p.route.name)}#${p.rule}`;
}

/** The name a route rule is addressed by: its own name, or `rule-<1-based index>`. */
export function ruleName(rule: { name?: string }, index: number): string {
  return rule.name && rule.name.length > 0 ? rule.name : `rule-${index + 1}`;
}
