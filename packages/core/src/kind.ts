// The PolicyKind plug-in contract. A kind says what one rule set looks like and where its named
// rules live; core builds the whole spec schema (targets, defaults/overrides blocks, unset) around it,
// so every kind gets the same D/O surface and core never branches on a kind's name.
import { z } from 'zod';
import { registerConditionFunction } from './merge/cel.ts';
import type { ChainResult, EffectiveRule } from './merge/fold.ts';
import type { PolicyRef } from './merge/policy.ts';
import type { PathRef } from './topology/types.ts';

/**
 * An action a kind contributes to a gateway's data plane on one path. Core does not look inside
 * `action`: its shape belongs to the data plane that runs it (@cascade/wiring checks it); `phase`
 * orders the actions of several kinds on one path (lower first).
 */
export interface DataPlaneAction {
  action: unknown;
  phase: number;
}

/** A named rule section inside a rule set, e.g. `limits` or `rules.authentication`. */
export interface RuleSection {
  /** Short name used in rule keys: `<section>.<ruleName>`. */
  name: string;
  /** Where the section's map of named rules sits inside a rule set. */
  path: readonly string[];
  /**
   * When set, only these keys of the map are rules (fixed slots such as `unauthenticated`); the other
   * keys belong to nested sections. Unset: every key is a rule name.
   */
  names?: readonly string[];
  /**
   * The section's rules are alternatives: any one of them succeeding is enough (authentication
   * methods). An override with rules in such a section replaces the section whole, whatever its
   * strategy: with `merge`, a lower policy could otherwise escape the override by adding a method.
   */
  alternatives?: boolean;
  /**
   * How a constraint (an overrides `"*"` rule) changes a lower rule of this section: the clipped
   * value from the lower rule's value and the constraint's. Unset: JSON merge patch (RFC 7386). A
   * kind whose values have units (rates per window) compares them here; it must never loosen.
   */
  clip?: (lower: unknown, constraint: unknown) => unknown;
}

/**
 * What a security kind enforces on a path while an invalid policy names a target on it: instead of
 * dropping the invalid policy (and serving the path without it), the path gets these rules (a
 * deny-all), which every view shows as the effective policy.
 */
export interface FailClosed {
  /** The rules in force, from the invalid policies. */
  rules: (invalid: readonly PolicyRef[]) => { section: string; name: string; value: unknown }[];
  /** What they do, for messages: "every request is denied (403) until it is fixed". */
  effect: string;
}

/** A function a kind adds to the CEL of conditions (e.g. `ratePer(rate, '1m')`); cheap and total. */
export interface ConditionFunction {
  /** cel-js signature, e.g. `ratePer(map, string): double`. */
  signature: string;
  // biome-ignore lint/suspicious/noExplicitAny: CEL passes its own value types
  impl: (...args: any[]) => unknown;
}

/** A semantic problem the schema cannot see; `field` is a dotted path under `spec`. */
export interface SpecIssue {
  field: string;
  message: string;
}

export interface PolicyKindDefinition<RuleSet extends z.ZodRawShape = z.ZodRawShape> {
  group: string;
  version: string;
  kind: string;
  plural: string;
  /** kubectl short names of the CRD (`kubectl get rlp`). */
  shortNames?: readonly string[];
  /** Kinds a policy may target: GatewayClass, Gateway (listener via sectionName), HTTPRoute, GRPCRoute. */
  targetKinds: readonly string[];
  /** Fields of one rule set (every field optional). Used bare, and inside defaults / overrides. */
  ruleSet: RuleSet;
  sections: readonly RuleSection[];
  /**
   * Fields of a rule set that are not named rules but travel with every rule taken from that rule set
   * (e.g. top-level request predicates). They land in each effective rule's `context`.
   */
  contextFields?: readonly string[];
  /** Security policy: fail closed on paths an invalid policy names (see FailClosed). */
  failClosed?: FailClosed;
  /** Functions this kind's rules need in conditions (registered once, for every condition). */
  conditionFunctions?: readonly ConditionFunction[];
  /** Semantic validation beyond the schema (e.g. CEL predicates that must compile). */
  validate?: (spec: Record<string, unknown>) => SpecIssue[];
  /** 1 turns the kind into 1:1 attachment: later policies on a taken target are Conflicted. */
  maxPoliciesPerTarget?: number;
  /**
   * Downstream objects for one gateway (an enforcement component's configuration), rendered from the
   * effective results of every path through it, never from a single policy. Pure: the controller
   * publishes what it returns and deletes what it no longer returns; the CLI prints it.
   */
  render?: (ctx: RenderContext) => RenderedObject[];
  /**
   * What the kind asks the gateway's data plane to do on each path through one gateway, keyed by
   * pathKey. Pure; the data plane's package (@cascade/wiring) gives an action its shape and assembles
   * every kind's actions into the gateway's one configuration.
   */
  actions?: (ctx: RenderContext) => Map<string, DataPlaneAction[]>;
  /**
   * An effective rule's value as published (EffectivePolicy, CLI), when the kind makes something
   * explicit that depends on where the rule came from (e.g. a rate-limit counter's scope by level).
   */
  effectiveValue?: (rule: EffectiveRule) => unknown;
  /** The resources `render` produces (for the controller's informers and RBAC). */
  renders?: readonly RenderedResource[];
  /**
   * One object every gateway contributes to and someone else owns (an operator's custom resource,
   * whose spec.limits holds every gateway's limits). Enabled when the controller setting `nameSetting`
   * names the object; it lives in the namespace named by the setting `namespaceSetting`. The controller
   * applies only the fields `combine` returns (server-side apply: it owns those fields and nothing
   * else), only to an object that exists, and only when they differ.
   */
  aggregate?: AggregateTarget;
}

export interface AggregateTarget {
  resource: { group: string; version: string; kind: string; plural: string };
  nameSetting: string;
  namespaceSetting: string;
  /** One gateway's part (e.g. its limits). */
  part: (ctx: RenderContext) => unknown[];
  /** The fields to apply, from every gateway's part (in gateway order). */
  combine: (parts: unknown[][]) => Record<string, unknown>;
  /** Its operator's readiness as reported in the live object; undefined: nothing reported. */
  ready?: (live: { status?: unknown }) => boolean | undefined;
}

export interface RenderedResource {
  group: string;
  version: string;
  kind: string;
  plural: string;
  /**
   * Objects of this resource all live in one namespace, named by the controller setting of this key
   * (e.g. the namespace its component reads its configuration from). When the setting is given, the
   * controller lists, watches and writes them in that namespace only and its RBAC for them is a Role
   * there, not cluster-wide; without it, objects live beside their gateway.
   */
  namespaceSetting?: string;
  /**
   * The consumer's readiness as it reports it in the live object (e.g. a `status.summary.ready`);
   * undefined: not reported. While an object reports false, the policies it carries are not
   * Enforced (Pending, naming it).
   */
  ready?: (live: { status?: unknown }) => boolean | undefined;
}

/**
 * A rendered object may leave out the rules of some policies (e.g. a ConfigMap that would
 * be over the API server's size with them): it names them in this annotation, a JSON list of
 * `{policy: "<Kind>:<ns>/<name>", reason}`, and those policies alone get Enforced=False
 * (PublishFailed) with the reason; every other policy's rules are published.
 */
export const REFUSED_POLICIES_ANNOTATION = 'cascade.dev/refused-policies';

/**
 * On a rendered object: the policies of the kind whose rules it carries (`<ns>/<name>`, comma-
 * separated). When present, only those wait on the object's readiness and name it in their status
 * (a tenant's policy never names another team's object); without it, every policy reaching the
 * object's gateway does (an object shared by the whole gateway, such as a limits ConfigMap).
 */
export const SOURCES_ANNOTATION = 'cascade.dev/sources';

export interface RenderedObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  [field: string]: unknown;
}

export interface RenderPath {
  path: PathRef;
  /** Request hosts of the path: the route's hostnames narrowed by the listener's (`*` for any). */
  hostnames: string[];
  result: ChainResult;
}

export interface RenderContext {
  gateway: { namespace: string; name: string; uid?: string };
  /** Every resolved path through the gateway, in path-key order. */
  paths: RenderPath[];
  /** The controller's name: objects carry it as `cascade.dev/managed-by`. */
  controller: string;
  /** Gateway API ReferenceGrants, for rules that reference objects in another namespace. */
  referenceGrants: ReferenceGrant[];
  /** The controller's settings for the kind (e.g. a namespace its component reads), by key. */
  settings: Readonly<Record<string, string>>;
}

/** A gateway.networking.k8s.io ReferenceGrant, as plain data. */
export interface ReferenceGrant {
  namespace: string;
  name: string;
  from: { group: string; kind: string; namespace: string }[];
  to: { group: string; kind: string; name?: string }[];
}

/**
 * Whether an object of `from` (group, kind, namespace) may reference `to` (group, kind, namespace,
 * name) under Gateway API's ReferenceGrant rules: same namespace always; otherwise a grant in the
 * target's namespace must list both.
 */
export function referenceAllowed(
  grants: readonly ReferenceGrant[],
  from: { group: string; kind: string; namespace: string },
  to: { group: string; kind: string; namespace: string; name?: string },
): boolean {
  if (from.namespace === to.namespace) return true;
  return grants.some(
    (g) =>
      g.namespace === to.namespace &&
      g.from.some((f) => f.group === from.group && f.kind === from.kind && f.namespace === from.namespace) &&
      g.to.some((t) => t.group === to.group && t.kind === to.kind && (!t.name || t.name === to.name)),
  );
}

export interface PolicyKind extends PolicyKindDefinition {
  /** The full spec schema (strict: unknown fields are errors). */
  specSchema: z.ZodType<Record<string, unknown>>;
  /** Rule-set field names (bare rules are recognised by any of these at the top level of spec). */
  ruleSetFields: readonly string[];
}

export const targetRefSchema = z.strictObject({
  group: z.string().optional(),
  kind: z.string().min(1),
  name: z.string().min(1).max(253),
  sectionName: z.string().min(1).max(253).optional(),
});
export type TargetRef = z.infer<typeof targetRefSchema>;

export const strategySchema = z.enum(['atomic', 'merge']);
export type Strategy = z.infer<typeof strategySchema>;

/** Maximum length of a D/O `condition` expression. */
export const MAX_CONDITION_LENGTH = 4096;

export function blockSchemaFor(ruleSet: z.ZodRawShape) {
  return z.strictObject({
    ...ruleSet,
    strategy: strategySchema.optional(),
    condition: z.string().min(1).max(MAX_CONDITION_LENGTH).optional(),
  });
}

export function specSchemaFor(ruleSet: z.ZodRawShape) {
  const block = blockSchemaFor(ruleSet);
  return z.strictObject({
    ...ruleSet,
    targetRef: targetRefSchema.optional(),
    targetRefs: z.array(targetRefSchema).min(1).max(16).optional(),
    defaults: block.optional(),
    overrides: block.optional(),
    unset: z.array(z.string().min(1).max(253)).max(64).optional(),
  });
}

export function definePolicyKind<RuleSet extends z.ZodRawShape>(
  def: PolicyKindDefinition<RuleSet>,
): PolicyKind {
  const fields = Object.keys(def.ruleSet);
  for (const s of def.sections) {
    if (!fields.includes(s.path[0] ?? '')) {
      throw new Error(`${def.kind}: section ${s.name} path ${s.path.join('.')} is not a rule-set field`);
    }
  }
  for (const reserved of [
    'targetRef',
    'targetRefs',
    'defaults',
    'overrides',
    'unset',
    'strategy',
    'condition',
  ]) {
    if (fields.includes(reserved)) throw new Error(`${def.kind}: rule-set field "${reserved}" is reserved`);
  }
  for (const f of def.conditionFunctions ?? []) registerConditionFunction(f.signature, f.impl);
  return {
    ...(def as unknown as PolicyKindDefinition),
    specSchema: specSchemaFor(def.ruleSet) as unknown as z.ZodType<Record<string, unknown>>,
    ruleSetFields: fields,
  };
}
