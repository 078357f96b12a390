// The wasm-shim configuration's shape (the `services` + `actionSets` form that kuadrant-operator v1.x
// writes and current wasm-shim accepts), the names it uses, and the settings it is built with.
// Built by wasm.ts; see its header for what each part means.
import type { PathRef, RouteObject } from '@cascade/core';
import type { Precedence } from '../routes/matches.ts';

export interface WasmService {
  /** `ratelimit-check`/`ratelimit-report`: Limitador's CheckRateLimit and Report (token limits). */
  type: 'auth' | 'ratelimit' | 'ratelimit-check' | 'ratelimit-report';
  endpoint: string;
  failureMode: 'allow' | 'deny';
  timeout: string;
}

export interface DataItem {
  expression: { key: string; value: string };
}

export interface ConditionalData {
  predicates?: string[];
  data: DataItem[];
}

export interface WasmAction {
  service: string;
  scope: string;
  predicates?: string[];
  conditionalData?: ConditionalData[];
  /** The policies whose rules this action carries (`<Kind>:<ns>/<name>`), for people reading it. */
  sources?: string[];
}

/** An action a policy kind contributes for one path, and when it runs (lower phase first). */
export interface ContributedAction {
  action: WasmAction;
  phase: number;
}

/**
 * Phases: rate limiting runs before auth, unless it reads `auth.*` (then after); token limits run
 * before request limits, and after them when they read `auth.*` (kuadrant-operator main's order).
 */
export const PHASE = {
  tokenLimit: 90,
  rateLimit: 100,
  auth: 200,
  rateLimitAfterAuth: 300,
  tokenLimitAfterAuth: 310,
} as const;

export interface ActionSet {
  name: string;
  routeRuleConditions: { hostnames: string[]; predicates?: string[] };
  actions: WasmAction[];
}

export interface WasmConfig {
  services: Record<string, WasmService>;
  actionSets: ActionSet[];
}

export const AUTH_SERVICE = 'auth-service';
export const RATELIMIT_SERVICE = 'ratelimit-service';
/** Token limits: checked before the request (hits 0), reported after the response (hits = tokens). */
export const RATELIMIT_CHECK_SERVICE = 'ratelimit-check-service';
export const RATELIMIT_REPORT_SERVICE = 'ratelimit-report-service';
/** The Envoy clusters the services call (defined by the provider objects). */
export const AUTH_CLUSTER = 'kuadrant-auth-service';
export const RATELIMIT_CLUSTER = 'kuadrant-ratelimit-service';
/** The scope of a refused route's auth action: no AuthConfig declares this host, so Authorino denies. */
export const DENY_SCOPE = 'refused.cascade.internal';
/** The predicate of the host-case guard: a host wasm-shim would look up under the wrong hostname. */
export const HOST_NOT_LOWER = 'request.host != request.host.lowerAscii()';

export interface WiringSettings {
  authFailureMode: 'allow' | 'deny';
  authTimeout: string;
  rateLimitFailureMode: 'allow' | 'deny';
  rateLimitTimeout: string;
  /**
   * Largest serialized configuration (bytes): past it routes are refused (fail closed), shared fairly
   * between namespaces (budget.ts).
   */
  maxConfigBytes: number;
  /** Action sets one namespace may have on one gateway (default 4,096). */
  maxSetsPerNamespace?: number;
  /**
   * Whether the wasm-shim image looks hostnames up case-insensitively (wasm-shim after v0.14); if
   * not, a host not in lower case is denied rather than let past its policies.
   */
  hostLookupFoldsCase?: boolean;
  /**
   * Which configuration the provider objects carry: `legacy` (services + actionSets with
   * conditionalData, any wasm-shim since v0.12) or `typed` (grpc actions with CEL message builders,
   * wasm-shim v0.14 and later, what kuadrant-operator main writes: typed.ts). Sizes are measured in
   * the form published. Default legacy.
   */
  configForm?: 'legacy' | 'typed';
  /**
   * Istio: a configuration larger than this (bytes, in the form published) is split over several
   * WasmPlugins by hostname group (shards.ts), so a route's change rewrites a small object. 0: never
   * split. Default 65,536.
   */
  shardBytes?: number;
}

export const DEFAULT_WIRING: WiringSettings = {
  authFailureMode: 'deny',
  authTimeout: '200ms',
  rateLimitFailureMode: 'allow',
  rateLimitTimeout: '100ms',
  // an object is stored whole in etcd (1.5 MiB); leave room for the wrapper and metadata
  maxConfigBytes: 1_000_000,
  maxSetsPerNamespace: 4096,
};

/** One path through the gateway with its route and what each kind contributes to it (maybe nothing). */
export interface WiringPath {
  path: PathRef;
  hostnames: string[];
  route: RouteObject | undefined;
  actions: ContributedAction[];
  /** The port the proxy listens on for the path's listener (`destination.port`), when known. */
  port?: number;
}

/** How the configuration is laid out for the gateway's proxy. */
export interface BuildOptions {
  /** Whose route order the sets follow (default: Envoy Gateway's). */
  precedence?: Precedence;
  /**
   * Every port the proxy listens on for the gateway (`destination.port`), those without routes too:
   * a request on a port without routes must meet no set.
   */
  ports?: readonly number[];
}

export interface WiringProblem {
  /** `<RouteKind>/<ns>/<name>` */
  route: string;
  rule?: string;
  reason: string;
  /** Refused for the size budget: the route's policies are not in force (they are denied instead). */
  size?: true;
}

export interface WiringResult {
  config: WasmConfig;
  /** Where each action set comes from (by set name): the route (`<Kind>/<ns>/<name>`), its rule, the path's listener. */
  origins: Record<string, { route: string; rule: string; listener: string }>;
  problems: WiringProblem[];
  /** Serialized size of the configuration (bytes). */
  bytes: number;
  /** Set when nothing fits and the configuration denies every request: why. */
  failedClosed?: string;
}
