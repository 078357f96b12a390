// What Cascade ships, listed once: the policy kinds with the names people type, the controllers a
// release runs (binary, image, field manager, Lease), and what each writes. cascadectl, cleanup, the
// chart generator, the images and the bench read it; nothing else keeps a list of kinds.
import { authPolicyKind } from '@cascade/authpolicy';
import { type CleanupPlan, EFFECTIVE_GROUP, type PolicyKind } from '@cascade/core';
import { conditionsWritten, NODE_REPORT_VERSION, SLICE_VERSION } from '@cascade/netpolicy';
import { rateLimitPolicyKind } from '@cascade/ratelimitpolicy';
import { tokenRateLimitPolicyKind } from '@cascade/tokenratelimitpolicy';
import { WIRING_COLLECTIONS } from '@cascade/wiring';

/** The gateway policy kinds whose actions are wired (each contributes through PolicyKind.actions). */
export const GATEWAY_POLICY_KINDS: readonly PolicyKind[] = [
  authPolicyKind,
  rateLimitPolicyKind,
  tokenRateLimitPolicyKind,
];

/** A kind as people name it (kubectl's rules: the kind, its plural, its short names, any case). */
export interface KindNames {
  kind: string;
  plural: string;
  /** The first is the one messages show. */
  shortNames: readonly string[];
  /** Which commands cover it: the gateway side or network policy. */
  side: 'gateway' | 'network';
}

/** Every policy kind Cascade reads, with its names: the gateway kinds' from their CRDs. */
export const POLICY_KIND_NAMES: readonly KindNames[] = [
  ...GATEWAY_POLICY_KINDS.map((k) => ({
    kind: k.kind,
    plural: k.plural,
    shortNames: k.shortNames ?? [],
    side: 'gateway' as const,
  })),
  // kubectl's own short name, and upstream network-policy-api's CRDs' short names
  { kind: 'NetworkPolicy', plural: 'networkpolicies', shortNames: ['netpol', 'np'], side: 'network' },
  { kind: 'AdminNetworkPolicy', plural: 'adminnetworkpolicies', shortNames: ['anp'], side: 'network' },
  {
    kind: 'BaselineAdminNetworkPolicy',
    plural: 'baselineadminnetworkpolicies',
    shortNames: ['banp'],
    side: 'network',
  },
  { kind: 'ClusterNetworkPolicy', plural: 'clusternetworkpolicies', shortNames: ['cnp'], side: 'network' },
];

/** The controller that runs a gateway policy kind (its binary, field manager and Lease name). */
export const kindController = (kind: PolicyKind): string => `${kind.kind.toLowerCase()}-controller`;

/** The wiring-controller's name: its binary, field manager, Lease and `cascade.dev/managed-by`. */
export const WIRING_CONTROLLER = 'wiring-controller';
export const NETPOL_CONTROLLER = 'netpolicy-controller';

/** A controller binary of a release: its name, the workspace that holds it and its entry in the image. */
export interface ControllerBinary {
  name: string;
  workspace: string;
  /** The entry point, relative to the repository (the image's /app). */
  main: string;
}

/** The controllers a release runs, in the chart's order. */
export const CONTROLLER_BINARIES: readonly ControllerBinary[] = [
  ...GATEWAY_POLICY_KINDS.map((k) => {
    const dir = k.kind.toLowerCase();
    return { name: kindController(k), workspace: `@cascade/${dir}`, main: `packages/${dir}/src/main.ts` };
  }),
  {
    name: WIRING_CONTROLLER,
    workspace: '@cascade/distribution',
    main: 'packages/distribution/src/bin/wiring-controller.ts',
  },
  {
    name: NETPOL_CONTROLLER,
    workspace: '@cascade/netpolicy',
    main: 'packages/netpolicy/src/controller/main.ts',
  },
];

/** The controllers' names (their field managers and Lease names), as the chart names them. */
export const CONTROLLERS: readonly string[] = CONTROLLER_BINARIES.map((c) => c.name);

/**
 * The controllers' settings the manifests are rendered for: the RateLimitPolicy controller writes
 * Limitador's ConfigMaps in Limitador's namespace only (its binary's --limitador-namespace default).
 * That namespace must exist (Limitador's); the rendered manifests and the chart do not create or own it.
 */
export const CONTROLLER_SETTINGS: Record<string, Record<string, string>> = {
  RateLimitPolicy: { limitadorNamespace: 'kuadrant-system' },
  TokenRateLimitPolicy: { limitadorNamespace: 'kuadrant-system' },
};

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
  conditions: conditionsWritten(NETPOL_CONTROLLER),
};
