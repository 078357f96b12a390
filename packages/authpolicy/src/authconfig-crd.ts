// A stand-in CustomResourceDefinition for Authorino's AuthConfig (authorino.kuadrant.io/v1beta3), for
// the integration tests only: the Authorino Go module is not available from the Go module proxy this
// project builds from, so its CRD cannot be taken from the pinned module the way the Gateway API and
// network-policy-api CRDs are. Same group, version, kind and plural; the spec is kept as written
// (x-kubernetes-preserve-unknown-fields), hosts required. In a cluster, install Authorino's own CRD.
export const authConfigStandInCrd = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: 'authconfigs.authorino.kuadrant.io' },
  spec: {
    group: 'authorino.kuadrant.io',
    names: { kind: 'AuthConfig', listKind: 'AuthConfigList', plural: 'authconfigs', singular: 'authconfig' },
    scope: 'Namespaced',
    versions: [
      {
        name: 'v1beta3',
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: {
          openAPIV3Schema: {
            type: 'object',
            properties: {
              spec: {
                type: 'object',
                required: ['hosts'],
                properties: { hosts: { type: 'array', items: { type: 'string' } } },
                'x-kubernetes-preserve-unknown-fields': true,
              },
              status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
            },
          },
        },
      },
    ],
  },
};
