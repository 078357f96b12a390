// RBAC for the policy kinds and EffectivePolicy. Users read EffectivePolicies through the built-in
// `view` role (and so `edit` and `admin`, which include it) by aggregation; only the controllers
// write them. Policy kinds are edited by whoever has `edit`/`admin` in the namespace. Each
// controller gets exactly what its reconcile uses.
import type { PolicyKind, RenderedResource } from '../kind.ts';
import { EFFECTIVE_GROUP } from './effective-policy.ts';

const AGGREGATE = 'rbac.authorization.k8s.io/aggregate-to-';
/** The verbs of read access. */
export const READ = ['get', 'list', 'watch'];
export const GATEWAY_GROUP = 'gateway.networking.k8s.io';
const PART_OF = { 'app.kubernetes.io/part-of': 'cascade' };
const ROLE_REF = { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole' };

type Obj = Record<string, unknown>;

/** A ClusterRole of Cascade's (labelled part-of cascade). */
export const clusterRole = (name: string, labels: Record<string, string>, rules: Obj[]): Obj => ({
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'ClusterRole',
  metadata: { name, labels: { 'app.kubernetes.io/part-of': 'cascade', ...labels } },
  rules,
});

/** Read access to EffectivePolicies and the policy kinds (with status), aggregated into `view`. */
export function viewClusterRole(kinds: readonly PolicyKind[]): Obj {
  return clusterRole('cascade-view', { [`${AGGREGATE}view`]: 'true' }, [
    { apiGroups: [EFFECTIVE_GROUP], resources: ['effectivepolicies'], verbs: READ },
    ...pluralsByGroup(kinds).map(([group, plurals]) => ({
      apiGroups: [group],
      resources: plurals.flatMap((p) => [p, `${p}/status`]),
      verbs: READ,
    })),
  ]);
}

/** Writing the policy kinds (not their status, not EffectivePolicies), aggregated into `edit` and `admin`. */
export function editClusterRole(kinds: readonly PolicyKind[]): Obj {
  return clusterRole('cascade-edit', { [`${AGGREGATE}edit`]: 'true', [`${AGGREGATE}admin`]: 'true' }, [
    ...pluralsByGroup(kinds).map(([group, plurals]) => ({
      apiGroups: [group],
      resources: plurals,
      verbs: ['create', 'update', 'patch', 'delete', 'deletecollection'],
    })),
  ]);
}

const confinedTo = (r: RenderedResource, settings: Readonly<Record<string, string>>) =>
  r.namespaceSetting ? settings[r.namespaceSetting] : undefined;

/**
 * What one kind's controller needs cluster-wide: read the topology and its policies, write their
 * status, EffectivePolicies, Events and the rendered objects that live beside their gateways. Its
 * Lease and rendered objects confined to one namespace (`settings`) are granted by Roles there
 * (controllerRoles), never cluster-wide: it cannot touch a Lease or ConfigMap in kube-system.
 */
export function controllerClusterRole(
  kind: PolicyKind,
  controller: string,
  settings: Readonly<Record<string, string>> = {},
  dataPlaneReads: readonly { group: string; plural: string }[] = [],
): Obj {
  return clusterRole(controller, {}, [
    {
      apiGroups: [GATEWAY_GROUP],
      resources: ['gatewayclasses', 'gateways', 'httproutes', 'grpcroutes'],
      verbs: READ,
    },
    { apiGroups: [GATEWAY_GROUP], resources: ['referencegrants'], verbs: READ },
    // <Kind>Affected on the targets' status (merged, never replaced)
    {
      apiGroups: [GATEWAY_GROUP],
      resources: ['gateways/status', 'httproutes/status', 'grpcroutes/status'],
      verbs: ['get', 'patch', 'update'],
    },
    { apiGroups: [''], resources: ['namespaces'], verbs: READ },
    { apiGroups: [kind.group], resources: [kind.plural], verbs: READ },
    // what the kind renders for its enforcement component (its enforcement component's configuration)
    ...(kind.renders ?? [])
      .filter((r) => !confinedTo(r, settings))
      .map((r) => ({
        apiGroups: [r.group],
        resources: [r.plural],
        verbs: [...READ, 'create', 'patch', 'update', 'delete'],
      })),
    { apiGroups: [kind.group], resources: [`${kind.plural}/status`], verbs: ['get', 'patch', 'update'] },
    // a kind that contributes data-plane actions is Enforced only where its gateways are wired: it
    // reads (never writes) the objects that carry each gateway's configuration (`dataPlaneReads`)
    ...(kind.actions
      ? dataPlaneReads.map((r) => ({
          apiGroups: [r.group],
          resources: [r.plural],
          verbs: READ,
        }))
      : []),
    {
      apiGroups: [EFFECTIVE_GROUP],
      resources: ['effectivepolicies'],
      verbs: [...READ, 'create', 'patch', 'update', 'delete'],
    },
    { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
  ]);
}

/**
 * The controller's namespaced grants: its Lease in its own namespace, and each rendered resource
 * confined to a namespace by a setting (e.g. ConfigMaps its component reads) there. Roles and RoleBindings.
 */
export function controllerRoles(
  kind: PolicyKind,
  controller: string,
  namespace: string,
  settings: Readonly<Record<string, string>> = {},
): Obj[] {
  const grants = new Map<string, Obj[]>([
    [
      namespace,
      [
        {
          apiGroups: ['coordination.k8s.io'],
          resources: ['leases'],
          verbs: [...READ, 'create', 'update', 'patch'],
        },
      ],
    ],
  ]);
  // the aggregate object (e.g. an operator's custom resource) in its namespace: read it, patch the fields we own
  const agg = kind.aggregate;
  const aggNs = agg ? settings[agg.namespaceSetting] : undefined;
  if (agg && aggNs)
    grants.set(aggNs, [
      ...(grants.get(aggNs) ?? []),
      { apiGroups: [agg.resource.group], resources: [agg.resource.plural], verbs: [...READ, 'patch'] },
    ]);
  for (const r of kind.renders ?? []) {
    const ns = confinedTo(r, settings);
    if (!ns) continue;
    grants.set(ns, [
      ...(grants.get(ns) ?? []),
      {
        apiGroups: [r.group],
        resources: [r.plural],
        verbs: [...READ, 'create', 'patch', 'update', 'delete'],
      },
    ]);
  }
  const labels = { 'app.kubernetes.io/part-of': 'cascade' };
  return [...grants].flatMap(([ns, rules]) => [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: controller, namespace: ns, labels },
      rules,
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: controller, namespace: ns, labels },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: controller },
      subjects: [{ kind: 'ServiceAccount', name: controller, namespace }],
    },
  ]);
}

export function controllerBinding(controller: string, namespace: string): Obj {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: controller, labels: { 'app.kubernetes.io/part-of': 'cascade' } },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: controller },
    subjects: [{ kind: 'ServiceAccount', name: controller, namespace }],
  };
}

/**
 * A controller limited to some namespaces (--watch-namespace) still reads the cluster-scoped objects
 * it resolves with: GatewayClasses and Namespaces (allowedRoutes selectors). This ClusterRole and its
 * binding grant only those; the rest comes from controllerWatchBindings.
 */
export function controllerClusterReads(controller: string, namespace: string): Obj[] {
  const name = `${controller}-cluster-reads`;
  return [
    clusterRole(name, {}, [
      { apiGroups: [GATEWAY_GROUP], resources: ['gatewayclasses'], verbs: READ },
      { apiGroups: [''], resources: ['namespaces'], verbs: READ },
    ]),
    {
      ...controllerBinding(controller, namespace),
      metadata: { name, labels: PART_OF },
      roleRef: { ...ROLE_REF, name },
    },
  ];
}

/**
 * --watch-namespace: the controller's ClusterRole granted in these namespaces only, by a RoleBinding
 * in each (named apart from controllerRoles' bindings, which a watched namespace may also hold),
 * instead of controllerBinding's cluster-wide grant.
 */
export function controllerWatchBindings(
  controller: string,
  namespace: string,
  namespaces: readonly string[],
): Obj[] {
  return namespaces.map((ns) => ({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: `${controller}-watch`, namespace: ns, labels: PART_OF },
    roleRef: { ...ROLE_REF, name: controller },
    subjects: [{ kind: 'ServiceAccount', name: controller, namespace }],
  }));
}

/** Plurals by API group, for rules that name several kinds. */
export function pluralsByGroup(kinds: readonly { group: string; plural: string }[]): [string, string[]][] {
  const by = new Map<string, string[]>();
  for (const k of kinds) by.set(k.group, [...(by.get(k.group) ?? []), k.plural]);
  return [...by];
}
