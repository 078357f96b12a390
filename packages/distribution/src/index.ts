// @cascade/distribution: what Cascade ships, assembled from the packages (see README.md).

// a gateway kind's controller grants, as the chart and `cascadectl manifests` write them
export { kindControllerGrants } from './grants.ts';
// the one list of kinds, their names, the controllers and what cleanup removes
export {
  CLEANUP_PLAN,
  CONTROLLER_BINARIES,
  CONTROLLER_SETTINGS,
  CONTROLLERS,
  type ControllerBinary,
  GATEWAY_POLICY_KINDS,
  type KindNames,
  kindController,
  NETPOL_CONTROLLER,
  POLICY_KIND_NAMES,
  WIRING_CONTROLLER,
} from './manifest.ts';
