// @cascade/wiring: the gateway's data plane. Each gateway's Kuadrant wasm-shim configuration from
// every gateway kind's actions (shim/), the route each provider's proxy picks and its order (routes/),
// the providers' objects that carry it (providers/), and the wiring-controller with the state the
// kind controllers read (controller/). See README.md.
export * from './controller/flags.ts';
export * from './controller/gateway.ts';
export * from './controller/rbac.ts';
export * from './controller/wiring-controller.ts';
export * from './controller/wiring-state.ts';
export * from './providers/providers.ts';
export * from './routes/matches.ts';
export * from './routes/proxy.ts';
export * from './shim/request.ts';
export * from './shim/wasm.ts';
