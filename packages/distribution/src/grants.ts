// A gateway kind's controller grants, as both the chart (chart-files.ts) and `cascadectl manifests`
// write them: its ClusterRole (with read access to the wiring's carriers and to EndpointSlices, for
// its decision point's Service: both feed its Enforced condition) and its Roles in the release's namespace.
import { controllerClusterRole, controllerRoles, type PolicyKind } from '@cascade/core';
import { ENDPOINT_SLICES, WIRING_CARRIERS } from '@cascade/wiring';
import { kindController } from './manifest.ts';

export function kindControllerGrants(
  kind: PolicyKind,
  namespace: string,
  settings: Readonly<Record<string, string>> = {},
): { name: string; clusterRole: Record<string, unknown>; roles: Record<string, unknown>[] } {
  const name = kindController(kind);
  return {
    name,
    clusterRole: controllerClusterRole(kind, name, settings, [...WIRING_CARRIERS, ENDPOINT_SLICES]),
    roles: controllerRoles(kind, name, namespace, settings),
  };
}
