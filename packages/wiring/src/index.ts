// @cascade/wiring: the gateway's data plane. See README.md. Its public surface, one module per line.

// controller/: the service each kind's rules need behind the gateway (Authorino, Limitador)
export {
  DECISION_POINTS,
  type DecisionPointName,
  decisionPointFlags,
  ENDPOINT_SLICES,
  endpointSlicesPath,
  readyEndpoints,
  serviceOf,
} from './controller/decision-point.ts';
// controller/: the wiring-controller, its flags and RBAC
export { WIRING_FLAGS, WIRING_USAGE, wiringFlags } from './controller/flags.ts';
export { gatewayWiring } from './controller/gateway.ts';
export { wiringObjects } from './controller/objects.ts';
export { WIRING_CARRIERS, wiringClusterRole } from './controller/rbac.ts';
export { WIRING_RESOURCES, WiringController } from './controller/wiring-controller.ts';
// controller/: what the kind controllers read of the wiring (core's DataPlaneSource), and cleanup's list
export { WIRING_COLLECTIONS, wiringGaps, wiringGapsFor } from './controller/wiring-state.ts';
// providers/: Istio's and Envoy Gateway's objects that carry the configuration
export {
  DEFAULT_PROVIDERS,
  PROVIDER_TITLES,
  type Provider,
  type PublishedShard,
  precedenceOf,
  providerObjects,
  providerOf,
  proxyPort,
  SHARD_ANNOTATION,
  WASM_SHIM_IMAGES,
  wasmPluginName,
} from './providers/providers.ts';
// routes/: the route the gateway's proxy picks
export { type ProxyChoice, proxyRoute } from './routes/proxy.ts';
// shim/: a request through the configuration, as wasm-shim and Limitador decide it
export {
  type CountedLimitSpec,
  countedLimits,
  type HttpRequest,
  type RequestTrace,
  requestAttributes,
  traceRequest,
} from './shim/request.ts';
// shim/: a large configuration split over several WasmPlugins
export { DEFAULT_SHARD_BYTES, hostnameGroups, MAX_SHARDS, type Shard, shardConfig } from './shim/shards.ts';
// shim/: the typed configuration (wasm-shim v0.14+) and a request through it
export {
  type ConfigForm,
  HITS_ADDEND,
  publishedConfig,
  type TypedAction,
  type TypedWasmConfig,
  toTypedConfig,
} from './shim/typed.ts';
export { messageAsMap, traceTypedRequest } from './shim/typed-request.ts';
// shim/: the wasm-shim configuration (its shape, names and phases; the action sets of a gateway)
export {
  type ActionSet,
  AUTH_SERVICE,
  buildWasmConfig,
  type ConditionalData,
  type ContributedAction,
  DEFAULT_WIRING,
  hasActions,
  isHostCaseGuard,
  PHASE,
  RATELIMIT_CHECK_SERVICE,
  RATELIMIT_REPORT_SERVICE,
  RATELIMIT_SERVICE,
  type WasmAction,
  type WasmConfig,
  type WiringPath,
  type WiringResult,
} from './shim/wasm.ts';
