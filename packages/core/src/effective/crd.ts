// CustomResourceDefinitions generated from zod schemas: zod is the single source of truth. The JSON
// Schema from zod is rewritten into a Kubernetes structural schema: records become
// additionalProperties, unions and free-form values keep their fields (x-kubernetes-preserve-unknown-
// fields) and are validated by the controller, `additionalProperties: false` is dropped (structural
// schemas prune unknown fields instead).
import { z } from 'zod';

type Json = Record<string, unknown>;

function structural(s: Json): Json {
  if (s.anyOf || s.oneOf || s.allOf) {
    const branches = (s.anyOf ?? s.oneOf ?? s.allOf) as Json[];
    const nonNull = branches.filter((b) => b.type !== 'null');
    if (nonNull.length === 1) return { ...structural(nonNull[0]!), nullable: true };
    if (nonNull.every((b) => b.type === 'string' && b.enum))
      return { type: 'string', enum: nonNull.flatMap((b) => b.enum as unknown[]) };
    return {
      'x-kubernetes-preserve-unknown-fields': true,
      ...(nonNull.every((b) => b.type === 'object') ? { type: 'object' } : {}),
    };
  }
  const out: Json = {};
  for (const k of [
    'type',
    'description',
    'enum',
    'minimum',
    'maximum',
    'minLength',
    'maxLength',
    'minItems',
    'maxItems',
    'pattern',
    'format',
    'default',
  ] as const) {
    if (s[k] !== undefined) out[k] = s[k];
  }
  if (s.const !== undefined) out.enum = [s.const];
  if (s.exclusiveMinimum !== undefined && typeof s.exclusiveMinimum === 'number')
    out.minimum = s.exclusiveMinimum + 1;
  if (s.type === 'integer' || s.type === 'number') delete out.format;
  if (s.type === 'object') {
    if (s.properties) {
      out.properties = Object.fromEntries(
        Object.entries(s.properties as Record<string, Json>).map(([k, v]) => [k, structural(v)]),
      );
      if (Array.isArray(s.required) && s.required.length) out.required = s.required;
    } else if (s.additionalProperties && typeof s.additionalProperties === 'object') {
      out.additionalProperties = structural(s.additionalProperties as Json);
    } else out['x-kubernetes-preserve-unknown-fields'] = true;
  } else if (s.type === 'array' && s.items) {
    out.items = structural(s.items as Json);
  } else if (s.type === undefined) {
    return { 'x-kubernetes-preserve-unknown-fields': true };
  }
  return out;
}

/** Structural OpenAPI v3 schema of a zod type. */
export function openApiSchema(schema: z.ZodType): Json {
  const js = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Json;
  return structural(js);
}

export interface CrdDefinition {
  group: string;
  version: string;
  kind: string;
  plural: string;
  scope?: 'Namespaced' | 'Cluster';
  spec: z.ZodType;
  /** Status stays free-form (conditions and kind-specific fields). */
  status?: boolean;
  labels?: Record<string, string>;
  categories?: string[];
  shortNames?: string[];
  printerColumns?: { name: string; type: string; jsonPath: string; description?: string }[];
  /** x-kubernetes-validations on spec (CEL evaluated by the API server). */
  validations?: { rule: string; message: string }[];
}

export function crdFor(d: CrdDefinition): Json {
  const spec = openApiSchema(d.spec);
  if (d.validations?.length) spec['x-kubernetes-validations'] = d.validations;
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${d.plural}.${d.group}`, ...(d.labels ? { labels: d.labels } : {}) },
    spec: {
      group: d.group,
      scope: d.scope ?? 'Namespaced',
      names: {
        kind: d.kind,
        listKind: `${d.kind}List`,
        plural: d.plural,
        singular: d.kind.toLowerCase(),
        ...(d.categories ? { categories: d.categories } : {}),
        ...(d.shortNames ? { shortNames: d.shortNames } : {}),
      },
      versions: [
        {
          name: d.version,
          served: true,
          storage: true,
          ...(d.status !== false ? { subresources: { status: {} } } : {}),
          ...(d.printerColumns ? { additionalPrinterColumns: d.printerColumns } : {}),
          schema: {
            openAPIV3Schema: {
              type: 'object',
              required: ['spec'],
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata: { type: 'object' },
                spec,
                ...(d.status !== false
                  ? { status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } }
                  : {}),
              },
            },
          },
        },
      ],
    },
  };
}
