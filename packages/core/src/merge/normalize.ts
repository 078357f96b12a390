// Validation and normalization of one policy object against its kind. Never throws: every problem
// comes back as a message naming the object and the field.
import type { z } from 'zod';
import type { PolicyKind, SpecIssue, TargetRef } from '../kind.ts';
import {
  classKey,
  GATEWAY_API_GROUP,
  gatewayKey,
  Level,
  ROUTE_KINDS,
  routeKey,
  sectionKey,
} from '../topology/types.ts';
import { compileCondition, isCompiled } from './cel.ts';
import type { NormalizedPolicy, PolicyObject, PolicyRule, ResolvedTarget, RuleBlock } from './policy.ts';

/** Serialized spec size above which a policy is refused (the API server's own object limit is ~1.5 MiB). */
export const MAX_SPEC_BYTES = 1024 * 1024;
const MAX_ISSUES = 10;

export type NormalizeResult = { ok: true; policy: NormalizedPolicy } | { ok: false; errors: string[] };

function zodIssues(error: z.ZodError): SpecIssue[] {
  return error.issues.map((i) => ({
    field: ['spec', ...i.path.map(String)].join('.'),
    message:
      i.code === 'unrecognized_keys'
        ? `unknown field(s) ${i.keys.map((k) => `"${k}"`).join(', ')}`
        : i.message,
  }));
}

function fmt(issues: SpecIssue[]): string[] {
  const out = issues.slice(0, MAX_ISSUES).map((i) => `${i.field}: ${i.message}`);
  if (issues.length > MAX_ISSUES) out.push(`... and ${issues.length - MAX_ISSUES} more`);
  return out;
}

function getPath(obj: unknown, path: readonly string[]): unknown {
  let cur = obj;
  for (const p of path) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string, unknown>)[p];
  }
  return cur;
}

function resolveTarget(
  kind: PolicyKind,
  ns: string,
  ref: TargetRef,
  field: string,
): ResolvedTarget | SpecIssue {
  const group = ref.group ?? GATEWAY_API_GROUP;
  if (group !== GATEWAY_API_GROUP || !kind.targetKinds.includes(ref.kind)) {
    return {
      field: `${field}.kind`,
      message: `${kind.kind} cannot target ${ref.kind} (group ${group || '""'}); allowed: ${kind.targetKinds.join(', ')} in ${GATEWAY_API_GROUP}`,
    };
  }
  if (ref.kind === 'GatewayClass') {
    if (ref.sectionName) return { field: `${field}.sectionName`, message: 'a GatewayClass has no sections' };
    return { ref, key: classKey(ref.name), level: Level.GatewayClass };
  }
  if (ref.kind === 'Gateway') {
    const key = gatewayKey(ns, ref.name);
    return ref.sectionName
      ? { ref, key: sectionKey(key, ref.sectionName), level: Level.Listener }
      : { ref, key, level: Level.Gateway };
  }
  if ((ROUTE_KINDS as readonly string[]).includes(ref.kind)) {
    const key = routeKey(ref.kind, ns, ref.name);
    return ref.sectionName
      ? { ref, key: sectionKey(key, ref.sectionName), level: Level.RouteRule }
      : { ref, key, level: Level.Route };
  }
  return { field: `${field}.kind`, message: `core does not know how to attach to ${ref.kind}` };
}

function extractRules(kind: PolicyKind, ruleSet: Record<string, unknown>): PolicyRule[] {
  const rules: PolicyRule[] = [];
  for (const s of kind.sections) {
    const section = getPath(ruleSet, s.path);
    if (section === null || typeof section !== 'object') continue;
    for (const [name, value] of Object.entries(section as Record<string, unknown>)) {
      if (s.names && !s.names.includes(name)) continue;
      if (value === undefined) continue;
      rules.push({ key: `${s.name}.${name}`, section: s.name, name, value });
    }
  }
  return rules;
}

function contextOf(kind: PolicyKind, ruleSet: Record<string, unknown>): Record<string, unknown> | undefined {
  if (!kind.contextFields) return undefined;
  const ctx: Record<string, unknown> = {};
  for (const f of kind.contextFields) if (ruleSet[f] !== undefined) ctx[f] = ruleSet[f];
  return Object.keys(ctx).length > 0 ? ctx : undefined;
}

/**
 * The object keys an invalid policy's spec names as targets, as far as they can be read (a policy
 * whose targetRef is itself broken names none). The engine keeps them so that every path such a
 * policy would reach knows it (ChainResult.invalid), and a kind can fail closed there.
 */
export function targetKeysOfInvalid(kind: PolicyKind, obj: PolicyObject): string[] {
  const spec = obj.spec as { targetRef?: unknown; targetRefs?: unknown } | undefined;
  if (!spec || typeof spec !== 'object') return [];
  const raw =
    spec.targetRef !== undefined ? [spec.targetRef] : Array.isArray(spec.targetRefs) ? spec.targetRefs : [];
  const ns = obj.metadata.namespace ?? 'default';
  const keys: string[] = [];
  for (const r of raw.slice(0, 16)) {
    if (!r || typeof r !== 'object') continue;
    const ref = r as Record<string, unknown>;
    if (typeof ref.kind !== 'string' || typeof ref.name !== 'string') continue;
    if (ref.group !== undefined && typeof ref.group !== 'string') continue;
    if (ref.sectionName !== undefined && typeof ref.sectionName !== 'string') continue;
    const t = resolveTarget(kind, ns, ref as unknown as TargetRef, 'spec.targetRef');
    if (!('field' in t) && !keys.includes(t.key)) keys.push(t.key);
  }
  return keys;
}

/** Validates and normalizes a policy object; `sequence` is its order of first appearance. */
export function normalizePolicy(kind: PolicyKind, obj: PolicyObject, sequence: number): NormalizeResult {
  const ns = obj.metadata.namespace ?? 'default';
  let size: number;
  try {
    size = JSON.stringify(obj.spec ?? null).length;
  } catch {
    return { ok: false, errors: ['spec: not serializable as JSON'] };
  }
  if (size > MAX_SPEC_BYTES) {
    return {
      ok: false,
      errors: [`spec: ${(size / 1048576).toFixed(1)} MiB exceeds the ${MAX_SPEC_BYTES / 1048576} MiB limit`],
    };
  }
  if (
    obj.spec === undefined ||
    obj.spec === null ||
    typeof obj.spec !== 'object' ||
    Array.isArray(obj.spec)
  ) {
    return { ok: false, errors: ['spec: required, must be an object'] };
  }
  const parsed = kind.specSchema.safeParse(obj.spec);
  if (!parsed.success) return { ok: false, errors: fmt(zodIssues(parsed.error)) };
  const spec = parsed.data;
  const issues: SpecIssue[] = [];

  const refs: { ref: TargetRef; field: string }[] = [];
  if (spec.targetRef && spec.targetRefs) {
    issues.push({ field: 'spec.targetRefs', message: 'set either targetRef or targetRefs, not both' });
  } else if (spec.targetRef) {
    refs.push({ ref: spec.targetRef as TargetRef, field: 'spec.targetRef' });
  } else if (spec.targetRefs) {
    for (const [i, ref] of (spec.targetRefs as TargetRef[]).entries())
      refs.push({ ref, field: `spec.targetRefs[${i}]` });
  } else {
    issues.push({ field: 'spec.targetRef', message: 'required (or targetRefs)' });
  }
  const targets: ResolvedTarget[] = [];
  for (const { ref, field } of refs) {
    const t = resolveTarget(kind, ns, ref, field);
    if ('field' in t) issues.push(t);
    else if (targets.some((x) => x.key === t.key))
      issues.push({ field, message: `duplicate target ${t.key}` });
    else targets.push(t);
  }

  const bareFields = kind.ruleSetFields.filter((f) => spec[f] !== undefined);
  const hasBlocks = spec.defaults !== undefined || spec.overrides !== undefined;
  if (bareFields.length > 0 && hasBlocks) {
    issues.push({
      field: `spec.${bareFields[0]}`,
      message: 'bare rules and defaults/overrides are mutually exclusive: move the bare rules into defaults',
    });
  }

  const blocks: RuleBlock[] = [];
  const addBlock = (as: RuleBlock['as'], raw: Record<string, unknown>, field: string) => {
    const block: RuleBlock = {
      as,
      strategy: (raw.strategy as RuleBlock['strategy']) ?? 'atomic',
      rules: extractRules(kind, raw),
    };
    const wild = block.rules.filter((r) => r.name === '*');
    if (wild.length > 0 && (as !== 'override' || block.strategy !== 'merge')) {
      issues.push({
        field: `${field}.${wild[0]!.section}`,
        message: 'a "*" rule (constraint) is only allowed in overrides with strategy: merge',
      });
    } else if (wild.length > 0 && wild.length !== block.rules.length) {
      issues.push({
        field: `${field}.${wild[0]!.section}`,
        message: 'a constraint block (with a "*" rule) may hold only "*" rules',
      });
    }
    const context = contextOf(kind, raw);
    if (context) block.context = context;
    if (typeof raw.condition === 'string') {
      const c = compileCondition(raw.condition);
      if (isCompiled(c)) block.condition = c;
      else issues.push({ field: `${field}.condition`, message: c.error });
    }
    blocks.push(block);
  };
  if (bareFields.length > 0 && !hasBlocks) addBlock('intent', spec, 'spec');
  if (spec.defaults) addBlock('default', spec.defaults as Record<string, unknown>, 'spec.defaults');
  if (spec.overrides) addBlock('override', spec.overrides as Record<string, unknown>, 'spec.overrides');

  if (kind.validate) {
    try {
      issues.push(...kind.validate(spec));
    } catch (e) {
      issues.push({
        field: 'spec',
        message: `validation failed: ${e instanceof Error ? e.message : String(e)}`,
      });
    }
  }
  if (issues.length > 0) return { ok: false, errors: fmt(issues) };

  const ts = obj.metadata.creationTimestamp ? Date.parse(obj.metadata.creationTimestamp) : Number.NaN;
  return {
    ok: true,
    policy: {
      id: `${obj.kind}:${ns}/${obj.metadata.name}`,
      ref: { kind: obj.kind, namespace: ns, name: obj.metadata.name },
      createdAt: Number.isNaN(ts) ? undefined : ts,
      sequence,
      generation: obj.metadata.generation,
      targets,
      blocks,
      unset: (spec.unset as string[] | undefined) ?? [],
    },
  };
}
