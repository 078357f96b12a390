// The staged kinds' CRDs and who may write them. Each CRD keeps its standard kind's spec as written
// (inline, `x-kubernetes-preserve-unknown-fields`: a NetworkPolicy copied with only kind and apiVersion
// changed is a staged one) and admits `spec.stagedAction` Set or Delete only; the spec itself is
// checked by the same code that checks the standard kind (engine/staged.ts, then the kind's rules),
// which names what it refuses. Staging follows the standard kinds' rights: a namespace's `edit` and
// `admin` write its StagedNetworkPolicies (as they write NetworkPolicies), `view` reads them; the
// cluster-scoped staged kinds, like ANP, BANP and ClusterNetworkPolicy, are cluster admins' only.
import { EFFECTIVE_GROUP } from '@cascade/core';
import { STAGED_ACTIONS, STAGED_KINDS, STAGED_VERSION } from '../engine/staged.ts';

type Obj = Record<string, unknown>;

export function stagedCrds(): Obj[] {
  return Object.entries(STAGED_KINDS).map(([kind, k]) => ({
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${k.plural}.${EFFECTIVE_GROUP}` },
    spec: {
      group: EFFECTIVE_GROUP,
      scope: k.namespaced ? 'Namespaced' : 'Cluster',
      names: {
        kind,
        listKind: `${kind}List`,
        plural: k.plural,
        singular: kind.toLowerCase(),
        categories: ['cascade', 'staged'],
        shortNames: [k.short],
      },
      versions: [
        {
          name: STAGED_VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [
            { name: 'Action', type: 'string', jsonPath: '.spec.stagedAction' },
            { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
          ],
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description: `A ${k.stages} tried before it enforces: its spec, plus stagedAction (Set: as written; Delete: the ${k.stages} of this name removed). It never changes a verdict.`,
              required: ['spec'],
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata: { type: 'object' },
                spec: {
                  type: 'object',
                  'x-kubernetes-preserve-unknown-fields': true,
                  properties: {
                    stagedAction: { type: 'string', enum: [...STAGED_ACTIONS], default: 'Set' },
                  },
                },
                status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
              },
            },
          },
        },
      ],
    },
  }));
}

const AGGREGATE = 'rbac.authorization.k8s.io/aggregate-to-';
const namespacedPlurals = Object.values(STAGED_KINDS)
  .filter((k) => k.namespaced)
  .map((k) => k.plural);

/** Reading and writing StagedNetworkPolicies where one may read and write NetworkPolicies. */
export function stagedClusterRoles(): Obj[] {
  const role = (name: string, to: string[], rules: Obj[]) => ({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name, labels: Object.fromEntries(to.map((t) => [`${AGGREGATE}${t}`, 'true'])) },
    rules,
  });
  return [
    role(
      'cascade-staged-view',
      ['view'],
      [
        {
          apiGroups: [EFFECTIVE_GROUP],
          resources: namespacedPlurals.flatMap((p) => [p, `${p}/status`]),
          verbs: ['get', 'list', 'watch'],
        },
      ],
    ),
    role(
      'cascade-staged-edit',
      ['edit', 'admin'],
      [
        {
          apiGroups: [EFFECTIVE_GROUP],
          resources: namespacedPlurals,
          verbs: ['create', 'update', 'patch', 'delete', 'deletecollection'],
        },
      ],
    ),
  ];
}
