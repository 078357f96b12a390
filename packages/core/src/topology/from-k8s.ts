// Gateway API objects (from the API server or manifests) -> the plain topology objects. Only the fields that matter to
// policy attachment are read (others are ignored); a wrong type names the field.

import { z } from 'zod';
import type { ReferenceGrant } from '../kind.ts';
import type {
  GatewayClassObject,
  GatewayObject,
  NamespaceObject,
  RouteMatch,
  RouteObject,
  RouteRuleSpec,
} from './types.ts';

/** A Kubernetes object as read from the API or a manifest. */
export interface TopologyManifest {
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    creationTimestamp?: string | Date;
  };
  spec?: unknown;
}

const selector = z.object({
  matchLabels: z.record(z.string(), z.string()).optional(),
  matchExpressions: z
    .array(
      z.object({
        key: z.string(),
        operator: z.enum(['In', 'NotIn', 'Exists', 'DoesNotExist']),
        values: z.array(z.string()).optional(),
      }),
    )
    .optional(),
});

export const gatewaySpec = z.object({
  gatewayClassName: z.string().min(1),
  listeners: z
    .array(
      z.object({
        name: z.string().min(1),
        hostname: z.string().optional(),
        port: z.number().int().optional(),
        protocol: z.string().optional(),
        allowedRoutes: z
          .object({
            namespaces: z
              .object({ from: z.enum(['Same', 'All', 'Selector']).optional(), selector: selector.optional() })
              .optional(),
            kinds: z.array(z.object({ group: z.string().optional(), kind: z.string() })).optional(),
          })
          .optional(),
      }),
    )
    .min(1),
});

// Matches: Gateway API's own bounds (64 matches per rule, 16 headers and query parameters per match),
// so a route the API server accepted is read whole and a hand-written file is bounded the same way.
const valueMatch = z.object({
  type: z.enum(['Exact', 'RegularExpression']).default('Exact'),
  name: z.string().min(1).max(256),
  value: z.string().max(4096),
});
const httpMatch = z.object({
  path: z
    .object({
      type: z.enum(['Exact', 'PathPrefix', 'RegularExpression']).default('PathPrefix'),
      value: z.string().min(1).max(1024).default('/'),
    })
    .optional(),
  method: z.string().min(1).max(16).optional(),
  headers: z.array(valueMatch).max(16).optional(),
  queryParams: z.array(valueMatch).max(16).optional(),
});
const grpcMatch = z.object({
  method: z
    .object({
      type: z.enum(['Exact', 'RegularExpression']).default('Exact'),
      service: z.string().min(1).max(1024).optional(),
      method: z.string().min(1).max(1024).optional(),
    })
    .optional(),
  headers: z.array(valueMatch).max(16).optional(),
});

export const routeSpec = z.object({
  hostnames: z.array(z.string()).optional(),
  parentRefs: z
    .array(
      z.object({
        group: z.string().optional(),
        kind: z.string().optional(),
        namespace: z.string().optional(),
        name: z.string().min(1),
        sectionName: z.string().optional(),
        port: z.number().int().optional(),
      }),
    )
    .default([]),
  rules: z.array(z.object({ name: z.string().optional(), matches: z.unknown().optional() })).default([{}]),
});

const httpMatches = z.array(httpMatch).max(64);
const grpcMatches = z.array(grpcMatch).max(64);

/** The rules' matches in the topology's form (a GRPCRoute's method match goes to `grpc`). */
function ruleMatches(
  kind: 'HTTPRoute' | 'GRPCRoute',
  rules: { name?: string | undefined; matches?: unknown }[],
): RouteRuleSpec[] | { error: string } {
  const out: RouteRuleSpec[] = [];
  for (const [i, r] of rules.entries()) {
    const rule: RouteRuleSpec = r.name === undefined ? {} : { name: r.name };
    if (r.matches !== undefined) {
      const parsed = (kind === 'HTTPRoute' ? httpMatches : grpcMatches).safeParse(r.matches);
      if (!parsed.success) {
        const e = parsed.error.issues[0]!;
        return {
          error: `spec.rules[${i}].matches${e.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('')}: ${e.message}`,
        };
      }
      rule.matches =
        kind === 'HTTPRoute'
          ? (parsed.data as RouteMatch[])
          : (parsed.data as z.infer<typeof grpcMatch>[]).map((g) => ({
              ...(g.method ? { grpc: g.method } : {}),
              ...(g.headers ? { headers: g.headers } : {}),
            }));
    }
    out.push(rule);
  }
  return out;
}

function issue(e: z.ZodError): string {
  const i = e.issues[0]!;
  return `${['spec', ...i.path.map(String)].join('.')}: ${i.message}`;
}

export type Converted =
  | { kind: 'GatewayClass'; value: GatewayClassObject }
  | { kind: 'Gateway'; value: GatewayObject }
  | { kind: 'Route'; value: RouteObject }
  | { kind: 'Namespace'; value: NamespaceObject };

/** Converts a Gateway API object or Namespace; returns an error message (field-named) or undefined if not ours. */
export function convertTopology(m: TopologyManifest): Converted | { error: string } | undefined {
  const ns = m.metadata.namespace ?? 'default';
  switch (m.kind) {
    case 'GatewayClass': {
      const controllerName = (m.spec as { controllerName?: unknown } | undefined)?.controllerName;
      return {
        kind: 'GatewayClass',
        value: {
          name: m.metadata.name,
          ...(typeof controllerName === 'string' ? { controllerName } : {}),
        },
      };
    }
    case 'Namespace':
      return {
        kind: 'Namespace',
        value: {
          name: m.metadata.name,
          labels: { ...(m.metadata.labels ?? {}), 'kubernetes.io/metadata.name': m.metadata.name },
        },
      };
    case 'Gateway': {
      const r = gatewaySpec.safeParse(m.spec ?? {});
      if (!r.success) return { error: issue(r.error) };
      return { kind: 'Gateway', value: { namespace: ns, name: m.metadata.name, ...r.data } as GatewayObject };
    }
    case 'HTTPRoute':
    case 'GRPCRoute': {
      const r = routeSpec.safeParse(m.spec ?? {});
      if (!r.success) return { error: issue(r.error) };
      const rules = ruleMatches(m.kind, r.data.rules);
      if ('error' in rules) return rules;
      const created = m.metadata.creationTimestamp;
      return {
        kind: 'Route',
        value: {
          kind: m.kind,
          namespace: ns,
          name: m.metadata.name,
          ...r.data,
          rules,
          ...(created
            ? { createdAt: created instanceof Date ? created.toISOString() : String(created) }
            : {}),
        } as RouteObject,
      };
    }
    default:
      return undefined;
  }
}

const referenceGrantSpec = z.object({
  from: z
    .array(z.object({ group: z.string(), kind: z.string().min(1), namespace: z.string().min(1) }))
    .min(1),
  to: z.array(z.object({ group: z.string(), kind: z.string().min(1), name: z.string().optional() })).min(1),
});

/** A ReferenceGrant (gateway.networking.k8s.io v1beta1) as plain data, or a field-named error. */
export function referenceGrantFromObject(m: TopologyManifest): ReferenceGrant | { error: string } {
  const r = referenceGrantSpec.safeParse(m.spec ?? {});
  if (!r.success) return { error: issue(r.error) };
  return { namespace: m.metadata.namespace ?? 'default', name: m.metadata.name, ...r.data };
}
