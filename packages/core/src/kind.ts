// The PolicyKind plug-in contract. A kind says what one rule set looks like and where its named
// rules live; core builds the whole spec schema (targets, defaults/overrides blocks, unset) around it,
// so every kind gets the same D/O surface and core never branches on a kind's name.
import { z } from 'zod';

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
  /** Semantic validation beyond the schema (e.g. CEL predicates that must compile). */
  validate?: (spec: Record<string, unknown>) => SpecIssue[];
  /** 1 turns the kind into 1:1 attachment: later policies on a taken target are Conflicted. */
  maxPoliciesPerTarget?: number;
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
  return {
    ...(def as unknown as PolicyKindDefinition),
    specSchema: specSchemaFor(def.ruleSet) as unknown as z.ZodType<Record<string, unknown>>,
    ruleSetFields: fields,
  };
}
