// A stand-in CustomResourceDefinition for limitador-operator's Limitador (limitador.kuadrant.io/
// v1alpha1), for the integration tests only: the limitador-operator Go module is not served by the
// Go module proxy this project builds from. Same group, version, kind and plural; spec.limits typed as
// limitador-operator types it (conditions, max_value, namespace, seconds, variables, name), the rest
// of the spec kept as written. In a cluster, install limitador-operator's own CRD.
export const limitadorStandInCrd = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: 'limitadors.limitador.kuadrant.io' },
  spec: {
    group: 'limitador.kuadrant.io',
    names: { kind: 'Limitador', listKind: 'LimitadorList', plural: 'limitadors', singular: 'limitador' },
    scope: 'Namespaced',
    versions: [
      {
        name: 'v1alpha1',
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: {
          openAPIV3Schema: {
            type: 'object',
            properties: {
              spec: {
                type: 'object',
                'x-kubernetes-preserve-unknown-fields': true,
                properties: {
                  limits: {
                    type: 'array',
                    items: {
                      type: 'object',
                      required: ['conditions', 'max_value', 'namespace', 'seconds', 'variables'],
                      properties: {
                        conditions: { type: 'array', items: { type: 'string' } },
                        max_value: { type: 'integer' },
                        namespace: { type: 'string' },
                        seconds: { type: 'integer' },
                        variables: { type: 'array', items: { type: 'string' } },
                        name: { type: 'string' },
                      },
                    },
                  },
                },
              },
              status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
            },
          },
        },
      },
    ],
  },
};
