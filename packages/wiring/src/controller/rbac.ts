// The wiring-controller's RBAC: what it reads (the topology, every wired kind's policies) and
// writes (its providers' objects beside the gateways), and what the kind controllers read of it.
import { clusterRole, GATEWAY_GROUP, type PolicyKind, pluralsByGroup, READ } from '@cascade/core';
import { PROVIDER_RESOURCES } from '../providers/providers.ts';

type Obj = Record<string, unknown>;

/**
 * The resources that carry a gateway's configuration (not the cluster patches beside them): what a
 * gateway kind's controller reads to know whether its gateways are wired (wiring-state.ts), and so
 * what its ClusterRole grants (controllerClusterRole's `dataPlaneReads`).
 */
export const WIRING_CARRIERS = [PROVIDER_RESOURCES.istio[0]!, PROVIDER_RESOURCES['envoy-gateway'][0]!];

/**
 * The wiring-controller's cluster-wide grant: read the topology and every wired kind's policies, and
 * write the providers' objects beside the gateways (WasmPlugin, EnvoyFilter, EnvoyExtensionPolicy,
 * EnvoyPatchPolicy: exactly the verbs its publisher uses), and Events on routes it refuses. No status,
 * no EffectivePolicies: those are the kind controllers'. Its Lease: controllerRoles with no renders.
 */
export function wiringClusterRole(
  kinds: readonly PolicyKind[],
  resources: readonly { group: string; plural: string }[],
  controller: string,
): Obj {
  return clusterRole(controller, {}, [
    {
      apiGroups: [GATEWAY_GROUP],
      resources: ['gatewayclasses', 'gateways', 'httproutes', 'grpcroutes', 'referencegrants'],
      verbs: READ,
    },
    { apiGroups: [''], resources: ['namespaces'], verbs: READ },
    ...pluralsByGroup(kinds).map(([group, plurals]) => ({
      apiGroups: [group],
      resources: plurals,
      verbs: READ,
    })),
    ...pluralsByGroup(resources).map(([group, plurals]) => ({
      apiGroups: [group],
      resources: plurals,
      verbs: [...READ, 'create', 'patch', 'update', 'delete'],
    })),
    { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
  ]);
}
