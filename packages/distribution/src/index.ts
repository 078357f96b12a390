// @cascade/distribution: what Cascade ships, assembled from the packages (see README.md).
export { CLEANUP_PLAN, CONTROLLERS, GATEWAY_POLICY_KINDS, kindController } from './manifest.ts';
