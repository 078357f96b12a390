// The D/O fold for one path: policies are merged from the least established (most specific) to the
// most established, each policy's defaults (or bare intent) before its overrides, exactly as the
// Kuadrant D/O RFC's merge algorithm reads:
//   defaults  B into p: drop from B what p.unset names; if p is empty take B; else atomic: keep p;
//             merge: add each rule of B that p lacks.
//   overrides B into p: atomic: p := B; merge: p[r] := r for each rule of B.
//   a block with a condition applies only where the CEL condition holds against p (`self`).
// Every rule keeps its provenance, and every rule that lost is recorded with who beat it.
import { isDeepStrictEqual } from 'node:util';
import type { FailClosed, RuleSection } from '../kind.ts';
import type { Level } from '../topology/types.ts';
import type { ChainLink } from './order.ts';
import { mergePatch } from './patch.ts';
import { type PolicyRef, policyName, type RuleBlock, type RuleOrigin } from './policy.ts';

/** The rule name that makes an overrides block a constraint on every lower rule of its section. */
export const WILDCARD = '*';

export interface EffectiveRule {
  key: string;
  section: string;
  name: string;
  value: unknown;
  source: PolicyRef;
  as: RuleOrigin;
  level: Level;
  /** Block context of the rule's own policy (e.g. its top-level request predicates). */
  context?: Record<string, unknown>;
  /** Rules with the same key that this one beat. */
  replaced: LostRule[];
}

/**
 * overridden/superseded: replaced; unset: removed; clipped: kept but changed by a constraint;
 * failed-closed: not in force because an invalid policy of a fail-closed kind names a target on the
 * path (the kind's deny-all is in force instead).
 */
export type LossReason = 'overridden' | 'superseded' | 'unset' | 'clipped' | 'failed-closed';

export interface LostRule {
  key: string;
  source: PolicyRef;
  as: RuleOrigin;
  /** The policies whose rules beat it (several for an atomic default beaten by a lower rule set). */
  by: PolicyRef[];
  reason: LossReason;
}

/**
 * condition-error: a default's condition failed to evaluate, the default was skipped;
 * condition-error-applied: an override's condition failed, the override was applied anyway (fail
 * safe: an override is the gateway owner's rule, and a tenant must not escape it by breaking it).
 */
export type StepOutcome =
  | 'applied'
  | 'ignored'
  | 'condition-false'
  | 'condition-error'
  | 'condition-error-applied'
  | 'failed-closed';

export interface FoldStep {
  policy: PolicyRef;
  level: Level;
  block: RuleOrigin;
  strategy: 'atomic' | 'merge';
  outcome: StepOutcome;
  detail: string;
}

export interface RefusedUnset {
  key: string;
  /** The policy whose `unset` named it. */
  by: PolicyRef;
  /** The policy whose override it is. */
  override: PolicyRef;
}

export interface ChainResult {
  /** Effective rules by `<section>.<name>`, in key order. */
  rules: ReadonlyMap<string, EffectiveRule>;
  lost: LostRule[];
  steps: FoldStep[];
  refusedUnsets: RefusedUnset[];
  /** Conditions that failed to evaluate; `applied`: the block was applied anyway (an override). */
  conditionErrors: { policy: PolicyRef; block: RuleOrigin; message: string; applied: boolean }[];
  /** Every policy on the chain, least established first. */
  sources: PolicyRef[];
  /**
   * Invalid policies that name a target on the path (ignored by the fold). A kind whose policies are
   * security policy fails closed where this is not empty (an auth kind renders a deny-all).
   */
  invalid: PolicyRef[];
  /**
   * Set when the kind fails closed and `invalid` is not empty: `rules` is then the kind's deny-all,
   * written by the invalid policies, and every rule the fold produced is in `lost` as failed-closed.
   */
  failedClosed?: { by: PolicyRef[]; message: string };
}

/**
 * The effective policy that is in force on a path of a kind that fails closed (`failClosed`) while
 * invalid policies name a target on it: the kind's deny-all rules, attributed to the first invalid
 * policy, replace the fold's rules, which are recorded as lost (failed-closed) so `explain` still
 * shows what would apply once the policy is fixed.
 */
export function applyFailClosed(
  result: ChainResult,
  failClosed: FailClosed | undefined,
  level: Level,
): ChainResult {
  if (!failClosed || result.invalid.length === 0) return result;
  const by = result.invalid;
  const source = by[0]!;
  const lost: LostRule[] = [...result.lost];
  for (const r of result.rules.values())
    lost.push({ key: r.key, source: r.source, as: r.as, by, reason: 'failed-closed' });
  const rules = new Map<string, EffectiveRule>();
  for (const d of failClosed.rules(by)) {
    const key = `${d.section}.${d.name}`;
    rules.set(key, {
      key,
      section: d.section,
      name: d.name,
      value: d.value,
      source,
      as: 'override',
      level,
      replaced: [],
    });
  }
  const message = `${by.map(policyName).join(', ')} ${by.length > 1 ? 'are' : 'is'} invalid: ${failClosed.effect}`;
  const step: FoldStep = {
    policy: source,
    level,
    block: 'override',
    strategy: 'atomic',
    outcome: 'failed-closed',
    detail: message,
  };
  return { ...result, rules, lost, steps: [...result.steps, step], failedClosed: { by, message } };
}

/** Whether an `unset` entry names a rule key: `section.name`, or a bare `name` for any section. */
function unsetNames(entry: string, key: string, name: string): boolean {
  return entry === key || entry === name;
}

/** The lower effective policy rendered back into the kind's rule-set shape, as `self` for CEL. */
export function renderRuleSet(
  rules: Iterable<EffectiveRule>,
  sections: readonly RuleSection[],
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const bySection = new Map(sections.map((s) => [s.name, s.path]));
  for (const s of sections) {
    let cur = out;
    for (const p of s.path) cur = (cur[p] ??= {}) as Record<string, unknown>;
  }
  for (const r of rules) {
    const path = bySection.get(r.section);
    if (!path) continue;
    let cur = out;
    for (const p of path) cur = cur[p] as Record<string, unknown>;
    cur[r.name] = r.value;
  }
  return out;
}

export function resolveChain(ordered: readonly ChainLink[], sections: readonly RuleSection[]): ChainResult {
  const alternatives = new Set(sections.filter((s) => s.alternatives).map((s) => s.name));
  const bySection = new Map(sections.map((s) => [s.name, s]));
  let ep = new Map<string, EffectiveRule>();
  const lost: LostRule[] = [];
  const steps: FoldStep[] = [];
  const refusedUnsets: RefusedUnset[] = [];
  const conditionErrors: ChainResult['conditionErrors'] = [];
  const unset: { entry: string; by: PolicyRef }[] = [];

  const toRule = (link: ChainLink, block: RuleBlock, r: RuleBlock['rules'][number]): EffectiveRule => {
    const e: EffectiveRule = {
      key: r.key,
      section: r.section,
      name: r.name,
      value: r.value,
      source: link.policy.ref,
      as: block.as,
      level: link.level,
      replaced: [],
    };
    if (block.context) e.context = block.context;
    return e;
  };
  const lose = (r: EffectiveRule, by: PolicyRef[], reason: LossReason): LostRule => {
    const l: LostRule = { key: r.key, source: r.source, as: r.as, by, reason };
    lost.push(l);
    return l;
  };

  /**
   * A constraint: an overrides block whose rules are all `*`. For every lower rule of the section where
   * the condition holds (`self` = lower policy, `rule` = {name, value}), the rule's value becomes the
   * lower value merge-patched with the constraint's; other fields of the lower rule stay.
   */
  const clip = (
    link: ChainLink,
    block: RuleBlock,
    into: Map<string, EffectiveRule>,
    self: unknown,
  ): string => {
    let clipped = 0;
    let errors = 0;
    for (const c of block.rules) {
      for (const old of [...into.values()]) {
        if (old.section !== c.section) continue;
        if (block.condition) {
          const res = block.condition.evaluate(self, { name: old.name, value: old.value });
          if (!res.ok) {
            errors++;
            const applied = block.as === 'override';
            conditionErrors.push({
              policy: link.policy.ref,
              block: block.as,
              message: `${old.key}: ${res.error}`,
              applied,
            });
            if (!applied) continue; // a constraint is an override: it applies when its condition errs
          } else if (!res.value) continue;
        }
        const sec = bySection.get(old.section);
        const value = sec?.clip ? sec.clip(old.value, c.value) : mergePatch(old.value, c.value);
        if (isDeepStrictEqual(value, old.value)) continue; // within the constraint already: not clipped
        const e: EffectiveRule = {
          ...old,
          value,
          source: link.policy.ref,
          as: 'override',
          // The rule is still its author's, only clipped: it keeps the author's level (and context).
          level: old.level,
          replaced: [lose(old, [link.policy.ref], 'clipped')],
        };
        into.set(old.key, e);
        clipped++;
      }
    }
    return `constraint clipped ${clipped} rule(s)${errors ? `, condition failed on ${errors} (clipped: fail safe)` : ''}`;
  };

  for (const link of ordered) {
    for (const block of link.policy.blocks) {
      const step: FoldStep = {
        policy: link.policy.ref,
        level: link.level,
        block: block.as,
        strategy: block.strategy,
        outcome: 'applied',
        detail: '',
      };
      steps.push(step);
      const constraint = block.rules.length > 0 && block.rules.every((r) => r.name === WILDCARD);
      if (constraint) {
        step.detail = clip(link, block, ep, renderRuleSet(ep.values(), sections));
        continue;
      }
      if (block.condition) {
        const res = block.condition.evaluate(renderRuleSet(ep.values(), sections));
        if (!res.ok) {
          const applied = block.as === 'override';
          step.outcome = applied ? 'condition-error-applied' : 'condition-error';
          step.detail = `condition "${block.condition.source}" failed: ${res.error}; ${applied ? 'the override applies (fail safe)' : 'the default is skipped'}`;
          conditionErrors.push({ policy: link.policy.ref, block: block.as, message: res.error, applied });
          if (!applied) continue;
        } else if (!res.value) {
          step.outcome = 'condition-false';
          step.detail = `condition "${block.condition.source}" is false`;
          continue;
        }
      }
      const incoming = block.rules.map((r) => toRule(link, block, r));
      if (block.as === 'override') {
        for (const r of incoming) {
          for (const u of unset) {
            if (unsetNames(u.entry, r.key, r.name))
              refusedUnsets.push({ key: r.key, by: u.by, override: r.source });
          }
        }
        if (block.strategy === 'atomic') {
          const replacedByKey = new Map<string, LostRule>();
          for (const old of ep.values())
            replacedByKey.set(old.key, lose(old, [link.policy.ref], 'overridden'));
          ep = new Map();
          for (const r of incoming) {
            const prev = replacedByKey.get(r.key);
            if (prev) r.replaced.push(prev);
            ep.set(r.key, r);
          }
          step.detail = `replaced the whole rule set with ${incoming.length} rule(s)`;
        } else {
          let replaced = 0;
          // sections of alternatives the override speaks to are replaced whole, even with `merge`
          const whole = new Set(incoming.filter((r) => alternatives.has(r.section)).map((r) => r.section));
          if (whole.size) {
            const keys = new Set(incoming.map((r) => r.key));
            for (const old of [...ep.values()]) {
              if (!whole.has(old.section) || keys.has(old.key)) continue;
              lose(old, [link.policy.ref], 'overridden');
              ep.delete(old.key);
              replaced++;
            }
          }
          for (const r of incoming) {
            const old = ep.get(r.key);
            if (old) {
              r.replaced.push(lose(old, [link.policy.ref], 'overridden'));
              replaced++;
            }
            ep.set(r.key, r);
          }
          step.detail = `set ${incoming.length} rule(s), ${replaced} of them replacing lower ones`;
        }
        continue;
      }
      // defaults and bare intent
      const kept: EffectiveRule[] = [];
      for (const r of incoming) {
        const u = unset.find((x) => unsetNames(x.entry, r.key, r.name));
        if (u) lose(r, [u.by], 'unset');
        else kept.push(r);
      }
      const dropped = incoming.length - kept.length;
      const unsetNote = dropped > 0 ? ` (${dropped} unset below)` : '';
      if (ep.size === 0) {
        for (const r of kept) ep.set(r.key, r);
        step.detail = `no lower rules: took ${kept.length} rule(s)${unsetNote}`;
      } else if (block.strategy === 'atomic') {
        const owners = uniqueRefs([...ep.values()].map((r) => r.source));
        for (const r of kept) {
          const l = lose(r, owners, 'superseded');
          ep.get(r.key)?.replaced.push(l);
        }
        step.outcome = kept.length > 0 ? 'ignored' : 'applied';
        step.detail = `atomic default ignored: lower rules from ${owners.map(policyName).join(', ')} stand${unsetNote}`;
      } else {
        let added = 0;
        for (const r of kept) {
          const have = ep.get(r.key);
          if (have) have.replaced.push(lose(r, [have.source], 'superseded'));
          else {
            ep.set(r.key, r);
            added++;
          }
        }
        step.detail = `merged: added ${added}, ${kept.length - added} already set below${unsetNote}`;
      }
    }
    for (const entry of link.policy.unset) unset.push({ entry, by: link.policy.ref });
  }

  const sorted =
    ep.size < 2 ? ep : new Map([...ep.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)));
  return {
    rules: sorted,
    lost,
    steps,
    refusedUnsets,
    conditionErrors,
    invalid: [],
    sources: ordered.map((l) => l.policy.ref),
  };
}

function uniqueRefs(refs: PolicyRef[]): PolicyRef[] {
  return [...new Set(refs)];
}
