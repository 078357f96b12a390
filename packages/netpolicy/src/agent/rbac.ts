// RBAC of the node agent: it reads what its engine resolves (pods, namespaces, nodes and the four
// policy kinds, or with --pod-source=slices its node's pods and the PodAddressSlices), the Services
// and EndpointSlices it translates in the datapath, and posts Warning Events (address conflicts, refusals). It writes nothing else: no
// status, no EffectivePolicies, no Leases (every agent works for its own node; none leads).
const READ = ['get', 'list', 'watch'];

export const AGENT_NAME = 'netpolicy-agent';

export function agentClusterRole(name = AGENT_NAME): Record<string, unknown> {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name, labels: { 'app.kubernetes.io/part-of': 'cascade' } },
    rules: [
      { apiGroups: [''], resources: ['pods', 'namespaces', 'nodes', 'services'], verbs: READ },
      { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: READ },
      { apiGroups: ['networking.k8s.io'], resources: ['networkpolicies'], verbs: READ },
      {
        apiGroups: ['policy.networking.k8s.io'],
        resources: ['adminnetworkpolicies', 'baselineadminnetworkpolicies', 'clusternetworkpolicies'],
        verbs: READ,
      },
      // the netpolicy-controller's PodAddressSlices (--pod-source=slices)
      { apiGroups: ['cascade.dev'], resources: ['podaddressslices'], verbs: READ },
      { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
    ],
  };
}
