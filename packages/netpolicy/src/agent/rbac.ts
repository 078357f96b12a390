// RBAC of the node agent: it reads what its engine resolves (namespaces, nodes, the four policy kinds
// and their Staged* kinds,
// and either every Pod or, with --pod-source=slices, the PodAddressSlices and no Pod at all), the
// Services and EndpointSlices it translates in the datapath. RBAC cannot limit a DaemonSet to its own
// node, so what it can do anywhere is kept to reads of policy inputs: with slices it reads no Pod
// (their specs, env and annotations are none of its business), and it posts no Event. It writes one
// object, its node's NetpolNodeReport (cluster/node-report.ts), and a ValidatingAdmissionPolicy lets
// it write only the one named after the node its ServiceAccount token is bound to; the controller
// turns the findings into Events. No status, no EffectivePolicies, no Leases.
import { STAGED_KINDS } from '../engine/staged.ts';

const READ = ['get', 'list', 'watch'];

export const AGENT_NAME = 'netpolicy-agent';

export type PodSource = 'pods' | 'slices';

export function agentClusterRole(
  name = AGENT_NAME,
  podSource: PodSource = 'slices',
): Record<string, unknown> {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name, labels: { 'app.kubernetes.io/part-of': 'cascade' } },
    rules: [
      {
        apiGroups: [''],
        resources: [...(podSource === 'pods' ? ['pods'] : []), 'namespaces', 'nodes', 'services'],
        verbs: READ,
      },
      { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: READ },
      { apiGroups: ['networking.k8s.io'], resources: ['networkpolicies'], verbs: READ },
      {
        apiGroups: ['policy.networking.k8s.io'],
        resources: ['adminnetworkpolicies', 'baselineadminnetworkpolicies', 'clusternetworkpolicies'],
        verbs: READ,
      },
      // staged policies: judged by the datapath beside the enforced ones (never enforced)
      {
        apiGroups: ['cascade.dev'],
        resources: Object.values(STAGED_KINDS).map((k) => k.plural),
        verbs: READ,
      },
      ...(podSource === 'slices'
        ? [{ apiGroups: ['cascade.dev'], resources: ['podaddressslices'], verbs: READ }]
        : []),
      // every node's report read (their tunnel addresses are those nodes' addresses, cluster/watch.ts);
      // its node's report only written: agentReportPolicy() refuses any other name
      {
        apiGroups: ['cascade.dev'],
        resources: ['netpolnodereports'],
        verbs: [...READ, 'create', 'patch', 'update'],
      },
    ],
  };
}

/** A Role named `<name>-<suffix>` in the release's namespace with `rules`, bound to the agent's ServiceAccount. */
function agentRole(
  namespace: string,
  name: string,
  suffix: string,
  rules: Record<string, unknown>[],
): Record<string, unknown>[] {
  const labels = { 'app.kubernetes.io/part-of': 'cascade' };
  const role = `${name}-${suffix}`;
  return [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: role, namespace, labels },
      rules,
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: role, namespace, labels },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role },
      subjects: [{ kind: 'ServiceAccount', name, namespace }],
    },
  ];
}

/**
 * With slices: the Pods of the agent's own (release) namespace, Cascade's controllers, read directly
 * (agent options' ownNamespace): a Role and its RoleBinding there, nothing cluster-wide.
 */
export const agentOwnPodsRole = (namespace: string, name = AGENT_NAME): Record<string, unknown>[] =>
  agentRole(namespace, name, 'own-pods', [{ apiGroups: [''], resources: ['pods'], verbs: READ }]);

/**
 * Its own DaemonSet, read by name in the release's namespace (uninstall.ts: a deleted DaemonSet is an
 * uninstall, and the agent takes Cascade off its node). A Role and its RoleBinding, nothing else.
 */
export const agentOwnDaemonSetRole = (namespace: string, name = AGENT_NAME): Record<string, unknown>[] =>
  agentRole(namespace, name, 'own-daemonset', [
    { apiGroups: ['apps'], resources: ['daemonsets'], resourceNames: [name], verbs: READ },
  ]);

/** The claim the API server puts in a pod-bound ServiceAccount token's user info (Kubernetes 1.30+). */
export const NODE_NAME_CLAIM = 'authentication.kubernetes.io/node-name';

/**
 * The ValidatingAdmissionPolicy (and its binding) that lets the agent of node N write only the
 * NetpolNodeReport named N: N is the node its token is bound to, which only the kubelet of N can get.
 */
export function agentReportPolicy(namespace: string, name = AGENT_NAME): Record<string, unknown>[] {
  const policy = `${name}-own-node-report`;
  return [
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name: policy, labels: { 'app.kubernetes.io/part-of': 'cascade' } },
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: {
          resourceRules: [
            {
              apiGroups: ['cascade.dev'],
              apiVersions: ['*'],
              operations: ['CREATE', 'UPDATE', 'DELETE'],
              resources: ['netpolnodereports'],
            },
          ],
        },
        matchConditions: [
          {
            name: 'the-agent',
            expression: `request.userInfo.username == 'system:serviceaccount:${namespace}:${name}'`,
          },
        ],
        validations: [
          {
            expression: `'${NODE_NAME_CLAIM}' in request.userInfo.extra && request.userInfo.extra['${NODE_NAME_CLAIM}'].size() == 1 && request.name == request.userInfo.extra['${NODE_NAME_CLAIM}'][0]`,
            message: 'an agent writes only the NetpolNodeReport of the node its token is bound to',
            reason: 'Forbidden',
          },
        ],
      },
    },
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name: policy, labels: { 'app.kubernetes.io/part-of': 'cascade' } },
      spec: { policyName: policy, validationActions: ['Deny'] },
    },
  ];
}
