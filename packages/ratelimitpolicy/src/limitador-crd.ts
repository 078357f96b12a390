// limitador-operator's Limitador CustomResourceDefinition (limitador.kuadrant.io/v1alpha1) as a
// structural schema, for the tests: the limitador-operator Go module is not served by the Go module
// proxy this project builds from. Written from limitador-operator's API (its generated CRD, checked
// field by field): spec.limits exactly as it types them (the part Cascade writes), and every other
// spec field by name with its type; the Kubernetes structures the admin sets there (affinity,
// resource requirements, storage, the pod disruption budget) are kept whole, as Cascade never writes
// them. Unknown spec fields and unknown fields of a limit are pruned, as the real CRD prunes them.
// In a cluster, install limitador-operator's own CRD.
const str = { type: 'string' };
const int = { type: 'integer' };
const kept = { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
const port = { type: 'object', properties: { port: { type: 'integer', format: 'int32' } } };

export const limitadorCrd = {
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
                properties: {
                  limits: {
                    type: 'array',
                    items: {
                      type: 'object',
                      required: ['conditions', 'max_value', 'namespace', 'seconds', 'variables'],
                      properties: {
                        conditions: { type: 'array', items: str },
                        max_value: int,
                        namespace: str,
                        seconds: int,
                        variables: { type: 'array', items: str },
                        name: str,
                      },
                    },
                  },
                  affinity: kept,
                  image: str,
                  imagePullSecrets: { type: 'array', items: { type: 'object', properties: { name: str } } },
                  listener: { type: 'object', properties: { grpc: port, http: port } },
                  metricLabelsDefault: str,
                  pdb: kept,
                  rateLimitHeaders: { type: 'string', enum: ['NONE', 'DRAFT_VERSION_03'] },
                  replicas: int,
                  resourceRequirements: kept,
                  storage: kept,
                  telemetry: { type: 'string', enum: ['basic', 'exhaustive'] },
                  tracing: { type: 'object', required: ['endpoint'], properties: { endpoint: str } },
                  verbosity: { type: 'integer', minimum: 1, maximum: 4 },
                  version: str,
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
