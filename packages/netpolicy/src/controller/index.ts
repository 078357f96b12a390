// The netpolicy-controller (binary: main.ts): runs the engine over the whole cluster and publishes
// EffectivePolicies of kind Network, conditions on the admin policies and Events (published*.ts,
// network-publisher.ts), and PodAddressSlices (slice-plan.ts, slice-publisher.ts). Imports engine/ and
// cluster/, never agent/.
export * from './controller.ts';
export * from './published.ts';
export * from './published-conditions.ts';
export * from './published-state.ts';
export * from './rbac.ts';
export * from './slice-plan.ts';
export * from './slice-publisher.ts';
