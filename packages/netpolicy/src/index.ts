// @cascade/netpolicy: network policy resolution and lowering, the node agent and the netpolicy-controller.
// Three rooms and a shared hall (see README.md): engine/ (pure), cluster/ (cluster state both programs
// read), agent/ and controller/. Its public surface, one module per line, by room.

// agent/: the node agent's datapath state and RBAC
export { datapathState } from './agent/datapath.ts';
export {
  AGENT_NAME,
  agentClusterRole,
  agentOwnDaemonSetRole,
  agentOwnPodsRole,
  agentReportPolicy,
} from './agent/rbac.ts';
// cluster/: what both programs read (slices, node reports, address owners)
export { NodeAddresses } from './cluster/node-addresses.ts';
export { NODE_REPORT_VERSION, netpolNodeReportCrd, nodeReportFromObject } from './cluster/node-report.ts';
export { AddressOwners } from './cluster/owners.ts';
export { podAddressSliceCrd, SLICE_VERSION, type SliceSpec } from './cluster/slices.ts';
export { stagedClusterRoles, stagedCrds } from './cluster/staged-crds.ts';
export { POLICY_PATHS } from './cluster/watch.ts';
// controller/: the netpolicy-controller's published state, slices and RBAC
export { conditionsWritten } from './controller/network-publisher.ts';
export { networkEffectiveSpec } from './controller/published.ts';
export {
  DEFAULT_ANALYSIS_INTERVAL_MS,
  PublishedState,
  type PublishedUpdate,
} from './controller/published-state.ts';
export { CONTROLLER_NAME, controllerLeaseRole, netpolControllerClusterRole } from './controller/rbac.ts';
export { planSlices, SlicePlanner } from './controller/slice-plan.ts';
// engine/: pure resolution, lowering, evaluation, budgets and lint
export {
  DEFAULT_NAMESPACE_ENTRY_BUDGET,
  enforceNamespaceBudget,
  networkPolicyCosts,
} from './engine/budget.ts';
export { formatPrefix } from './engine/cidr.ts';
export { deadNetworkPolicyRules } from './engine/dead-rules.ts';
export { NetpolEngine } from './engine/engine.ts';
export { type Decision, evaluateDirection, type Remote, type RuleSet } from './engine/evaluate.ts';
export {
  EXPOSURE_PROTOCOLS,
  type ExposureEdge,
  type ExposurePeer,
  exposure,
  NEW_NAMESPACE,
  type PortSpan,
  rangeToPrefixes,
  type Workload,
} from './engine/exposure.ts';
export { ID } from './engine/identities.ts';
export { lintNetpol } from './engine/lint.ts';
export { lowerLayer } from './engine/lower.ts';
export type { MapStateEntry } from './engine/mapstate.ts';
export {
  type Cluster,
  type NetPolicyObject,
  namespaceFromObject,
  nodeFromObject,
  type Pod,
  podFromObject,
} from './engine/model.ts';
export { formatPortPrefix, PROTO, PROTO_NAMES } from './engine/ports.ts';
export { describePrecedence } from './engine/precedence.ts';
export {
  type Protocol as RecommendProtocol,
  type Recommendation,
  type RecommendConnection,
  type RecommendEnd,
  type RecommendedPolicy,
  recommend,
  stableSelector,
} from './engine/recommend.ts';
export type { Direction } from './engine/rules.ts';
export { policyKey } from './engine/rules.ts';
export { ServiceCatalog } from './engine/services.ts';
export {
  applyStaged,
  isStagedKind,
  STAGED_ACTIONS,
  STAGED_KINDS,
  STAGED_VERSION,
  type StagedAction,
  type StagedKindName,
  type StagedPolicy,
  stagedErrors,
  stagedFromObject,
  stagedTarget,
  stagedTargetName,
} from './engine/staged.ts';
export { DEFAULT_TENANT_LABEL, validTenantLabel } from './engine/tenants.ts';
export {
  judgementClass,
  mapConnection,
  oracleConnection,
  probeRuleSet,
  remoteOf,
  ruleSetOf,
} from './engine/verdict.ts';
