// @cascade/core: the kind-agnostic engine. See README.md.

export * from './effective/crd.ts';
export * from './effective/effective-policy.ts';
export * from './effective/path-result.ts';
export * from './effective/rbac.ts';
export * from './kind.ts';
export * from './merge/cel.ts';
export * from './merge/engine.ts';
export * from './merge/fold.ts';
export * from './merge/normalize.ts';
export * from './merge/order.ts';
export * from './merge/patch.ts';
export * from './merge/policy.ts';
export * from './predicates.ts';
export * from './runtime/client.ts';
export * from './runtime/controller.ts';
export * from './runtime/informer.ts';
export * from './runtime/leader.ts';
export * from './runtime/metrics.ts';
export * from './runtime/queue.ts';
export * from './runtime/tracing.ts';
export * from './status/conditions.ts';
export * from './topology/from-k8s.ts';
export * from './topology/hostnames.ts';
export * from './topology/selectors.ts';
export * from './topology/topology.ts';
export * from './topology/types.ts';
