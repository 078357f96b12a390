// Status conditions of the network policies, as plain functions of the engine: Accepted (or Invalid
// naming the field), what each selects counted in label sets, equal-priority overlaps, and dead or
// shadowed rules from the exact lint.
import { matchesSelector } from '@cascade/core';
import type { NetpolEngine } from '../engine/engine.ts';
import { type LintFinding, lintNetpol } from '../engine/lint.ts';
import type { BuiltPolicy, SubjectMatch } from '../engine/rules.ts';
import { namespaceMatches } from '../engine/selection.ts';
import { type LabelSet, liveLabelSets } from './published.ts';

/** How an Accepted=True condition's message starts when the policy has warnings. */
export const WARNED = 'accepted with warnings: ';

export interface PolicyCondition {
  type: string;
  status: 'True' | 'False';
  reason: string;
  message: string;
}

/** The subjects of a valid policy (its rules' and its isolation's); none for an invalid one. */
function subjectsOf(built: BuiltPolicy): SubjectMatch[] | undefined {
  if (built.errors.length) return undefined;
  const subjects = [...new Set(built.rules.map((r) => r.subject))];
  if (built.isolation)
    subjects.push({ namespaces: { name: built.isolation.namespace }, pods: built.isolation.subject });
  return subjects;
}

/** Whether any of `subjects` selects label set `s`. */
export const selectsSet = (subjects: readonly SubjectMatch[], s: LabelSet) =>
  subjects.some(
    (sub) => namespaceMatches(sub.namespaces, s.namespace, s.nsLabels) && matchesSelector(sub.pods, s.labels),
  );

/**
 * How many label sets, in how many namespaces, each policy selects; kept as sets come and go (a
 * policy change makes a new one).
 */
export class SelectingCounts {
  private readonly subjects = new Map<string, SubjectMatch[]>();
  /** policy key -> namespace -> label sets selected there */
  private readonly counts = new Map<string, Map<string, number>>();

  constructor(engine: NetpolEngine, sets: Iterable<LabelSet>) {
    for (const [key, { built }] of engine.policies) {
      const subjects = subjectsOf(built);
      if (subjects) this.subjects.set(key, subjects);
    }
    for (const s of sets) this.add(s, 1);
  }

  /** A label set appeared (1) or went (-1). */
  add(s: LabelSet, sign: 1 | -1): void {
    for (const [key, subjects] of this.subjects) if (selectsSet(subjects, s)) this.count(key, s, sign);
  }

  /** The policies `keys` changed (or went): counted again over `sets`, the live label sets. */
  refresh(engine: NetpolEngine, keys: Iterable<string>, sets: readonly LabelSet[]): void {
    for (const key of keys) {
      this.counts.delete(key);
      this.subjects.delete(key);
      const built = engine.policies.get(key)?.built;
      const subjects = built && subjectsOf(built);
      if (!subjects) continue;
      this.subjects.set(key, subjects);
      for (const s of sets) if (selectsSet(subjects, s)) this.count(key, s, 1);
    }
  }

  private count(key: string, s: LabelSet, sign: 1 | -1): void {
    let byNs = this.counts.get(key);
    if (!byNs) this.counts.set(key, (byNs = new Map()));
    const n = (byNs.get(s.namespace) ?? 0) + sign;
    if (n > 0) byNs.set(s.namespace, n);
    else byNs.delete(s.namespace);
  }

  of(key: string): { sets: number; namespaces: number } {
    const byNs = this.counts.get(key);
    let sets = 0;
    for (const n of byNs?.values() ?? []) sets += n;
    return { sets, namespaces: byNs?.size ?? 0 };
  }
}

/**
 * Conditions of every policy the engine holds, by `Kind[/ns]/name`, with the lint's `findings` and
 * the label sets each selects (both computed here when not given).
 */
export function networkPolicyConditions(
  engine: NetpolEngine,
  findings: readonly LintFinding[] = lintNetpol(engine),
  selecting: SelectingCounts = new SelectingCounts(engine, liveLabelSets(engine).values()),
): Map<string, PolicyCondition[]> {
  const notes = new Map<string, string[]>();
  const note = (policy: string, message: string) => {
    let l = notes.get(policy);
    if (!l) notes.set(policy, (l = []));
    l.push(message);
  };
  const ports = new Map<string, string[]>();
  for (const f of findings) {
    if (f.code === 'NoPods') continue; // the Selecting condition says it
    if (f.code === 'UnknownNamedPort') {
      ports.set(f.policy, [...(ports.get(f.policy) ?? []), f.message]);
      continue;
    }
    note(f.policy, f.summary ?? f.message);
    // an equal-priority overlap is reported once, on the first of the pair: both say it in status
    const pair = /^(\S+) and (\S+) have the same priority/.exec(f.message);
    if (pair?.[2] && pair[2] !== f.policy) note(pair[2], f.message);
    else if (pair?.[1] && pair[1] !== f.policy) note(pair[1], f.message);
  }
  const problems = new Map(engine.problems().map((p) => [p.policy, p]));
  const out = new Map<string, PolicyCondition[]>();
  for (const [key, { built }] of engine.policies) {
    const prob = problems.get(key);
    const conds: PolicyCondition[] = [];
    if (built.errors.length)
      conds.push({
        type: 'Accepted',
        status: 'False',
        reason: 'Invalid',
        // what is wrong, then what is enforced meanwhile (a NetworkPolicy fails closed)
        message: [...built.errors, ...built.warnings].join('; '),
      });
    else
      conds.push({
        type: 'Accepted',
        status: 'True',
        reason: 'Accepted',
        message: prob?.warnings.length ? `${WARNED}${prob.warnings.join('; ')}` : 'the policy is valid',
      });
    if (!built.errors.length) {
      const { sets: selected, namespaces } = selecting.of(key);
      conds.push(
        selected
          ? {
              type: 'Selecting',
              status: 'True',
              reason: 'PodsSelected',
              message: `selects pods of ${selected} label set${selected === 1 ? '' : 's'} in ${namespaces} namespace${namespaces === 1 ? '' : 's'}`,
            }
          : {
              type: 'Selecting',
              status: 'False',
              reason: 'NoPods',
              message: 'selects no pod: it has no effect now',
            },
      );
      const mine = notes.get(key) ?? [];
      const overlap = mine.filter((m) => m.includes('have the same priority'));
      const dead = mine.filter((m) => !m.includes('have the same priority'));
      conds.push(
        overlap.length
          ? { type: 'Overlapping', status: 'True', reason: 'SamePriority', message: overlap.join('; ') }
          : {
              type: 'Overlapping',
              status: 'False',
              reason: 'NoOverlap',
              message: 'no policy at the same priority selects the same pods',
            },
        dead.length || ports.has(key)
          ? {
              type: 'RulesEffective',
              status: 'False',
              reason: dead.length ? 'DeadRules' : 'UnknownNamedPort',
              message: [...dead, ...(ports.get(key) ?? [])].join('; '),
            }
          : {
              type: 'RulesEffective',
              status: 'True',
              reason: 'AllRulesEffective',
              message: 'no rule is dead or shadowed',
            },
      );
    }
    out.set(key, conds);
  }
  return out;
}
