// EffectivePolicy (cascade.dev/v1alpha1): the read-only, published result of resolution. One object
// per (policy kind, route) in the route's namespace and one per (policy kind, gateway) for what applies
// at gateway level. Identical path results are stored once with all their paths.
import { isEqual } from 'lodash-es';
import { z } from 'zod';
import type { PolicyKind } from '../kind.ts';
import type { ChainResult } from '../merge/fold.ts';
import type { PathRef } from '../topology/types.ts';
import { crdFor } from './crd.ts';
import { labelValue, objectName } from './names.ts';
import { type PathResult, toPathResult } from './path-result.ts';

const ref = z.object({ kind: z.string(), namespace: z.string(), name: z.string() });
/** A network rule as the netpolicy-controller publishes it (policyKind Network). */
const networkRule = z.object({
  tier: z.enum(['admin', 'networkpolicy', 'baseline']),
  policy: z.string(),
  rule: z.string(),
  action: z.enum(['Allow', 'Deny', 'Pass']),
  priority: z.number().int().optional(),
  peers: z.array(z.object({ peer: z.string(), selectsNone: z.boolean().optional() })),
  ports: z.array(z.string()).optional(),
});
export const effectivePolicySpecSchema = z.object({
  policyKind: z.string(),
  targetRef: z.object({ group: z.string(), kind: z.string(), name: z.string() }),
  sources: z.array(ref),
  ruleCount: z.number().int(),
  paths: z.array(
    z.object({
      paths: z.array(
        z.object({
          gatewayClass: z.string(),
          gateway: z.string(),
          listener: z.string(),
          routeKind: z.string(),
          route: z.string(),
          rule: z.string(),
        }),
      ),
      rules: z.record(
        z.string(),
        z.object({
          value: z.unknown(),
          source: ref,
          as: z.enum(['default', 'override', 'intent']),
          context: z.record(z.string(), z.unknown()).optional(),
        }),
      ),
      overridden: z.array(
        z.object({ rule: z.string(), source: ref, as: z.string(), by: z.array(ref), reason: z.string() }),
      ),
    }),
  ),
  /**
   * policyKind Network: what applies to the pods of one label set in this namespace, per direction,
   * in the order it is decided (admin, NetworkPolicy with its isolation, baseline).
   */
  network: z
    .object({
      podSelector: z.object({ matchLabels: z.record(z.string(), z.string()) }),
      ingress: z.array(networkRule),
      egress: z.array(networkRule),
      truncated: z.array(z.enum(['ingress', 'egress'])).optional(),
    })
    .optional(),
  /** Short texts for `kubectl get effectivepolicies` (the target and every source, each cut to fit a column). */
  summary: z.object({ target: z.string(), sources: z.string() }).optional(),
});
export type EffectivePolicySpec = z.infer<typeof effectivePolicySpecSchema>;

export const EFFECTIVE_GROUP = 'cascade.dev';
export const MANAGED_BY = 'cascade.dev/managed-by';

/** The EffectivePolicy's short names (`ep` is Endpoints'). */
export const EFFECTIVE_SHORT_NAMES = ['effpol'] as const;

export const effectivePolicyCrd = crdFor({
  group: EFFECTIVE_GROUP,
  version: 'v1alpha1',
  kind: 'EffectivePolicy',
  plural: 'effectivepolicies',
  spec: effectivePolicySpecSchema,
  status: false,
  categories: ['cascade'],
  shortNames: [...EFFECTIVE_SHORT_NAMES],
  printerColumns: [
    { name: 'Kind', type: 'string', jsonPath: '.spec.policyKind' },
    { name: 'Target', type: 'string', jsonPath: '.spec.summary.target' },
    { name: 'Rules', type: 'integer', jsonPath: '.spec.ruleCount' },
    { name: 'Sources', type: 'string', jsonPath: '.spec.summary.sources' },
    { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
  ],
});

/** Longest Target and Sources texts in `kubectl get effectivepolicies`. */
export const SUMMARY_TARGET_MAX = 48;
export const SUMMARY_SOURCES_MAX = 64;

/**
 * The printer columns' texts: the target cut to SUMMARY_TARGET_MAX characters (a cut label set says
 * how many labels it has), the sources as `ns/name` (a kind other than `kind` prefixed) joined up to
 * SUMMARY_SOURCES_MAX characters with how many more there are. kubectl prints only the first value of
 * a list, so the columns read these strings.
 */
export function effectiveSummary(
  target: string,
  sources: readonly { kind: string; namespace: string; name: string }[],
  kind: string,
  items = 1,
): { target: string; sources: string } {
  const tail = `... (${items > 1 ? `${items} labels` : `${target.length} chars`})`;
  const t =
    target.length <= SUMMARY_TARGET_MAX
      ? target
      : `${target.slice(0, SUMMARY_TARGET_MAX - tail.length)}${tail}`;
  const names = sources.map(
    (s) => `${s.kind === kind ? '' : `${s.kind} `}${s.namespace ? `${s.namespace}/` : ''}${s.name}`,
  );
  let out = '';
  let shown = 0;
  for (const n of names) {
    const more = names.length - shown - 1;
    const next = out ? `${out}, ${n}` : n;
    if (next.length + (more ? ` +${more}`.length : 0) > SUMMARY_SOURCES_MAX && shown > 0) break;
    out = next;
    shown++;
  }
  if (shown < names.length) out = `${out} +${names.length - shown}`;
  return { target: t, sources: out || '<none>' };
}

export interface EffectivePolicyObject {
  apiVersion: string;
  kind: 'EffectivePolicy';
  metadata: { name: string; namespace: string; labels: Record<string, string>; ownerReferences?: unknown[] };
  spec: EffectivePolicySpec;
}

/** Builds the EffectivePolicy of one target from the results of its paths. */
export function buildEffectivePolicy(
  kind: PolicyKind,
  controller: string,
  target: { kind: string; namespace: string; name: string; uid?: string },
  results: [PathRef, ChainResult][],
): EffectivePolicyObject {
  const groups: { key: PathResult; paths: PathResult['path'][] }[] = [];
  const sources = new Map<string, { kind: string; namespace: string; name: string }>();
  for (const [path, r] of results) {
    const pr = toPathResult(kind.kind, path, r, kind);
    for (const s of r.sources)
      sources.set(`${s.kind}/${s.namespace}/${s.name}`, {
        kind: s.kind,
        namespace: s.namespace,
        name: s.name,
      });
    const g = groups.find((x) => isEqual(x.key.rules, pr.rules) && isEqual(x.key.overridden, pr.overridden));
    if (g) g.paths.push(pr.path);
    else groups.push({ key: pr, paths: [pr.path] });
  }
  const byPath = (a: PathResult['path'], b: PathResult['path']) =>
    JSON.stringify(a).localeCompare(JSON.stringify(b));
  const paths = groups
    .map((g) => ({ paths: g.paths.sort(byPath), rules: g.key.rules, overridden: g.key.overridden }))
    .sort((a, b) => byPath(a.paths[0]!, b.paths[0]!));
  const ruleKeys = new Set(paths.flatMap((p) => Object.keys(p.rules)));
  return {
    apiVersion: `${EFFECTIVE_GROUP}/v1alpha1`,
    kind: 'EffectivePolicy',
    metadata: {
      name: objectName(`${kind.kind.toLowerCase()}-${target.kind.toLowerCase()}-${target.name}`),
      namespace: target.namespace,
      labels: {
        [MANAGED_BY]: controller,
        'cascade.dev/policy-kind': kind.kind,
        'cascade.dev/target-kind': target.kind,
        'cascade.dev/target-name': labelValue(target.name),
      },
      ...(target.uid
        ? {
            ownerReferences: [
              {
                apiVersion: 'gateway.networking.k8s.io/v1',
                kind: target.kind,
                name: target.name,
                uid: target.uid,
              },
            ],
          }
        : {}),
    },
    spec: {
      policyKind: kind.kind,
      targetRef: { group: 'gateway.networking.k8s.io', kind: target.kind, name: target.name },
      sources: [...sources.values()].sort((a, b) =>
        `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`),
      ),
      ruleCount: ruleKeys.size,
      paths,
      summary: effectiveSummary(`${target.kind} ${target.name}`, [...sources.values()], kind.kind),
    },
  };
}

/** The CRD of a policy kind, generated from its zod spec schema, with what the API server can check. */
export function policyCrd(kind: PolicyKind): Record<string, unknown> {
  const bare = kind.ruleSetFields.map((f) => `has(self.${f})`).join(' || ');
  return crdFor({
    group: kind.group,
    version: kind.version,
    kind: kind.kind,
    plural: kind.plural,
    spec: kind.specSchema,
    labels: { 'gateway.networking.k8s.io/policy': 'inherited' },
    categories: ['cascade', 'gateway-api'],
    ...(kind.shortNames ? { shortNames: [...kind.shortNames] } : {}),
    printerColumns: [
      { name: 'Accepted', type: 'string', jsonPath: '.status.conditions[?(@.type=="Accepted")].status' },
      { name: 'Enforced', type: 'string', jsonPath: '.status.conditions[?(@.type=="Enforced")].reason' },
      { name: 'Target', type: 'string', jsonPath: '.spec.targetRef.name' },
      { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
    ],
    validations: [
      {
        rule: 'has(self.targetRef) != has(self.targetRefs)',
        message: 'set exactly one of targetRef or targetRefs',
      },
      {
        rule: `!((${bare}) && (has(self.defaults) || has(self.overrides)))`,
        message: 'bare rules and defaults/overrides are mutually exclusive',
      },
    ],
  });
}
