// What Cascade ships, listed once: the policy kinds and the controllers that run them, and what each
// controller writes. cascadectl, cleanup, the chart generator, the images and the bench read it.
import { authPolicyKind } from '@cascade/authpolicy';
import { type CleanupPlan, EFFECTIVE_GROUP, type PolicyKind } from '@cascade/core';
import { NODE_REPORT_VERSION, SLICE_VERSION } from '@cascade/netpolicy';
import { rateLimitPolicyKind } from '@cascade/ratelimitpolicy';
import { WIRING_COLLECTIONS } from '@cascade/wiring';

/** The gateway policy kinds whose actions are wired (each contributes through PolicyKind.actions). */
export const GATEWAY_POLICY_KINDS: readonly PolicyKind[] = [authPolicyKind, rateLimitPolicyKind];

/** The controller that runs a gateway policy kind (its binary, field manager and Lease name). */
export const kindController = (kind: PolicyKind): string => `${kind.kind.toLowerCase()}-controller`;

/** The controllers a release runs (their binaries, field managers and Lease names), as the chart names them. */
export const CONTROLLERS = [
  ...GATEWAY_POLICY_KINDS.map(kindController),
  'wiring-controller',
  'netpolicy-controller',
] as const;

/** What `cascadectl cleanup` removes after `helm uninstall` (core's cleanupCluster). */
export const CLEANUP_PLAN: CleanupPlan = {
  kinds: GATEWAY_POLICY_KINDS.map((kind) => ({ kind, controller: kindController(kind) })),
  collections: [
    ...WIRING_COLLECTIONS,
    // Cascade's own cluster-scoped CRDs: every object in them is Cascade's
    { what: 'PodAddressSlice', path: `/apis/${EFFECTIVE_GROUP}/${SLICE_VERSION}/podaddressslices` },
    { what: 'NetpolNodeReport', path: `/apis/${EFFECTIVE_GROUP}/${NODE_REPORT_VERSION}/netpolnodereports` },
  ],
  controllers: CONTROLLERS,
};
