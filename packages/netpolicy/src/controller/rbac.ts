import { STAGED_KINDS } from '../engine/staged.ts';

const READ = ['get', 'list', 'watch'];

export const CONTROLLER_NAME = 'netpolicy-controller';

/**
 * RBAC of the netpolicy-controller: it reads what the agents read (no Services), writes the status of
 * the admin policy kinds, the EffectivePolicies of kind Network and the PodAddressSlices, reads the
 * agents' NetpolNodeReports, and posts (and lists, to not repeat them after a restart) Events: its
 * own and the agents' findings (agents have no Event grant), and writes staged policies' status. Its Lease is granted by a Role in its own namespace
 * (controllerLeaseRole).
 */
const STAGED_PLURALS = Object.values(STAGED_KINDS).map((k) => k.plural);

export function netpolControllerClusterRole(name = CONTROLLER_NAME): Record<string, unknown> {
  const admin = ['adminnetworkpolicies', 'baselineadminnetworkpolicies', 'clusternetworkpolicies'];
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name, labels: { 'app.kubernetes.io/part-of': 'cascade' } },
    rules: [
      { apiGroups: [''], resources: ['pods', 'namespaces', 'nodes'], verbs: READ },
      { apiGroups: ['networking.k8s.io'], resources: ['networkpolicies'], verbs: READ },
      { apiGroups: ['policy.networking.k8s.io'], resources: admin, verbs: READ },
      {
        apiGroups: ['policy.networking.k8s.io'],
        resources: admin.map((r) => `${r}/status`),
        verbs: ['get', 'patch', 'update'],
      },
      {
        apiGroups: ['cascade.dev'],
        resources: ['effectivepolicies', 'podaddressslices'],
        verbs: [...READ, 'create', 'patch', 'update', 'delete'],
      },
      // staged policies: read, their Accepted condition written (staged-status.ts)
      {
        apiGroups: ['cascade.dev'],
        resources: STAGED_PLURALS,
        verbs: READ,
      },
      {
        apiGroups: ['cascade.dev'],
        resources: STAGED_PLURALS.map((r) => `${r}/status`),
        verbs: ['get', 'patch', 'update'],
      },
      // the agents' findings, relayed as Events (report-relay.ts)
      { apiGroups: ['cascade.dev'], resources: ['netpolnodereports'], verbs: READ },
      { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch', 'list'] },
    ],
  };
}

/** The controller's Lease, in its own namespace: a Role and its RoleBinding. */
export function controllerLeaseRole(namespace: string, name = CONTROLLER_NAME): Record<string, unknown>[] {
  const labels = { 'app.kubernetes.io/part-of': 'cascade' };
  return [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name, namespace, labels },
      rules: [
        {
          apiGroups: ['coordination.k8s.io'],
          resources: ['leases'],
          verbs: [...READ, 'create', 'update', 'patch'],
        },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name, namespace, labels },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: [{ kind: 'ServiceAccount', name, namespace }],
    },
  ];
}
