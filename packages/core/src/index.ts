// @cascade/core: the kind-agnostic engine. See README.md. Its public surface, one module per line;
// the Kubernetes kit is `@cascade/core/kube`, the test fixtures `@cascade/core/testing`.

// controller/: the policy controller and the parts another controller reuses
export {
  type CleanupPlan,
  type ConditionsWritten,
  cleanupCluster,
  type OwnedCollection,
} from './controller/cleanup.ts';
export { PolicyController } from './controller/controller.ts';
export type { DataPlaneGaps, DataPlaneSource } from './controller/data-plane.ts';
export { checkSize, logPublishChange, type PublishFailure, PublishLedger } from './controller/publish.ts';
export { RenderedPublisher, renderInformers } from './controller/rendered.ts';
export { runPolicyController, type SettingFlag, watchNamespaces } from './controller/run.ts';
export { POLICY_CONTROLLER_NAME } from './controller/target-status.ts';
export { TOPOLOGY_RESOURCES, TopologyFeed } from './controller/topology-feed.ts';
export { policyInformer } from './controller/watches.ts';
// effective/: the EffectivePolicy and policy CRDs, rendering per gateway, names, RBAC
export { crdFor } from './effective/crd.ts';
export {
  EFFECTIVE_GROUP,
  EFFECTIVE_SHORT_NAMES,
  effectivePolicyCrd,
  effectiveSummary,
  MANAGED_BY,
  policyCrd,
} from './effective/effective-policy.ts';
export { hashOf, labelValue, objectName } from './effective/names.ts';
export { comparePathResults, type PathResult, toPathResult } from './effective/path-result.ts';
export {
  clusterRole,
  controllerBinding,
  controllerClusterReads,
  controllerClusterRole,
  controllerRoles,
  controllerWatchBindings,
  editClusterRole,
  GATEWAY_GROUP,
  pluralsByGroup,
  READ,
  viewClusterRole,
} from './effective/rbac.ts';
export { pathHostnames, renderAll, renderContext, renderedKey, renderGateway } from './effective/render.ts';
export { toYaml } from './effective/yaml.ts';
// The PolicyKind contract every kind implements, and what rendering gives and takes
export {
  type DataPlaneAction,
  definePolicyKind,
  type PolicyKind,
  REFUSED_POLICIES_ANNOTATION,
  type ReferenceGrant,
  type RenderContext,
  type RenderedObject,
  type RenderPath,
  referenceAllowed,
  SOURCES_ANNOTATION,
  type SpecIssue,
} from './kind.ts';
// merge/: the D/O engine, its CEL (cost-bounded) and the fold
export {
  COST_LIMIT,
  compileCondition,
  compileWithLimit,
  isCompiled,
  queryMap,
  re2Problem,
} from './merge/cel.ts';
export { PolicyEngine } from './merge/engine.ts';
export { type EffectiveRule, resolveChain } from './merge/fold.ts';
export type { ChainLink } from './merge/order.ts';
export { mergePatch } from './merge/patch.ts';
export { type NormalizedPolicy, type PolicyObject, policyName } from './merge/policy.ts';
// Kuadrant's request predicates (CEL), validated at admission
export { celFieldIssues, predicateIssues, predicateListSchema, predicateSchema } from './predicates.ts';
// status/: the fold's conditions, and the Enforced ladder (the one place Enforced is decided)
export { affectedCondition, type Condition, policyConditions } from './status/conditions.ts';
export { ENFORCED_LADDER, type EnforcedFacts, withEnforcement } from './status/enforced.ts';
// topology/: the Gateway API graph
export { type Converted, convertTopology, referenceGrantFromObject } from './topology/from-k8s.ts';
export { hostnameCovers, hostnameSpecificity } from './topology/hostnames.ts';
export { matchesSelector, validateSelector } from './topology/selectors.ts';
export { objectKeysOfPath } from './topology/topology.ts';
export {
  type GatewayObject,
  gatewayKey,
  type LabelSelector,
  type PathRef,
  pathKey,
  type RouteKind,
  type RouteMatch,
  type RouteObject,
  routeKey,
  ruleName,
  type ValueMatch,
} from './topology/types.ts';
