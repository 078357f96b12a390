// What the netpolicy-controller should publish, kept up to date cheaply. Pure: the engine and a clock
// in, the desired EffectivePolicies and policy conditions out, plus what moved (so the controller
// compares only that with the live objects).
//
// The EffectivePolicies and most conditions depend on the rules and on the pod label sets only
// (namespace, namespace labels, pod labels): pod churn inside existing pod identities, the common
// event, recomputes nothing. A label set that appears or goes (a rollout) builds or drops its own
// object and moves the counts of the policies selecting it; the others are rebuilt only when a peer
// starts or stops selecting any pod. A policy change rebuilds only the objects it can reach: those of
// the namespaces of a NetworkPolicy (a tenant's edit, the common policy change), and those of the
// label sets an admin or baseline policy's subjects select, before or after the edit (an ANP whose
// subject is 5% of the namespaces rebuilds 5% of the objects). The exact analyses of the cluster as
// it is (NetworkPolicy rules made dead by admin rules, entry budgets per node) read every pod's
// addresses: they run at once when a policy changes (for the namespaces it reaches only, with the pods
// as last analysed: a NetworkPolicy rule is dead or live by the rules whose subjects are its own
// namespace's pods), and at most once per `analysisIntervalMs` when only pods, nodes or namespaces
// change.
import { DEFAULT_NAMESPACE_ENTRY_BUDGET } from '../engine/budget.ts';
import type { NetpolEngine } from '../engine/engine.ts';
import { type LintFinding, lintPopulation, lintStructure } from '../engine/lint.ts';
import type { BuiltPolicy, SubjectMatch } from '../engine/rules.ts';
import {
  EffectiveBuilder,
  effectiveKey,
  type LabelSet,
  liveLabelSets,
  type NetworkEffective,
  PeerWitnesses,
} from './published.ts';
import {
  networkPolicyConditions,
  type PolicyCondition,
  SelectingCounts,
  selectsSet,
} from './published-conditions.ts';

/** The policies that changed, and whether a label set's object can change with them. */
interface PolicyScope {
  keys: string[];
  /** The namespaces of the NetworkPolicies among them. */
  namespaces: Set<string>;
  affects: (s: LabelSet) => boolean;
}

/** Default pause between two exact analyses when only pods change. */
export const DEFAULT_ANALYSIS_INTERVAL_MS = 30_000;

export interface PublishedStateOptions {
  /** Minimum time between two exact analyses on pod churn (default 30 s; 0: every update). */
  analysisIntervalMs?: number;
  /** Namespace entry budget the agents enforce (for the budget findings). */
  entryBudget?: number;
  /** Clock (ms), for tests. */
  now?: () => number;
}

export interface PublishedUpdate {
  /** The desired EffectivePolicies changed (or were recomputed). */
  effectives: boolean;
  /** Which of them to compare with the live ones (`namespace/name`); undefined: every one. */
  changed?: string[];
  /** The desired conditions changed or were recomputed. */
  conditions: boolean;
  /** Pods changed since the last exact analysis, which was put off: update again after this. */
  analysisDueInMs?: number;
  /** Time spent, ms: EffectivePolicies, rule and identity analysis, the exact analysis, conditions. */
  ms: { effectives: number; structure: number; population: number; conditions: number };
}

export class PublishedState {
  /** Desired EffectivePolicies by `namespace/name`. */
  effectives = new Map<string, NetworkEffective>();
  /** Desired conditions by `Kind[/ns]/name`. */
  conditions = new Map<string, PolicyCondition[]>();
  private readonly opts: PublishedStateOptions;
  private inputs?: string;
  private policyRevision = -1;
  private sets = new Map<string, LabelSet>();
  private witnesses?: PeerWitnesses;
  private builder?: EffectiveBuilder;
  private selecting?: SelectingCounts;
  private structure: LintFinding[] = [];
  private population: LintFinding[] = [];
  private analysed?: { policies: number; population: number; at: number };
  /** The policies as last seen (built objects are replaced, never changed, by the engine). */
  private built = new Map<string, BuiltPolicy>();
  /** Namespaces whose policies changed since the exact analysis ('all': more than those changed). */
  private unanalysed: Set<string> | 'all' = 'all';
  private podIds?: string;

  constructor(opts: PublishedStateOptions = {}) {
    this.opts = opts;
  }

  /** Everything from the engine: a policy changed (or a full pass). */
  private rebuild(engine: NetpolEngine): void {
    this.policyRevision = engine.policyRevision;
    this.built = builtPolicies(engine);
    this.unanalysed = 'all';
    this.sets = liveLabelSets(engine);
    const witnesses = new PeerWitnesses(engine, this.sets);
    this.witnesses = witnesses;
    this.builder = new EffectiveBuilder(engine, (p) => witnesses.selectsNone(p));
    this.selecting = new SelectingCounts(engine, this.sets.values());
    this.effectives = new Map([...this.sets.values()].map((s) => [effectiveKey(s), this.builder!.build(s)]));
  }

  /**
   * The policies changed since the last build and what they can reach: the namespaces of the
   * NetworkPolicies among them, and the subjects of the others' rules, old and new (an admin policy's
   * rules appear only on the objects of label sets its subjects select, so an edit of an ANP whose
   * subject is 5% of the namespaces rebuilds 5% of the objects). Undefined when a policy's rules
   * cannot be placed that way.
   */
  private changedPolicies(engine: NetpolEngine): PolicyScope | undefined {
    const namespaces = new Set<string>();
    const subjects = new Set<SubjectMatch>();
    const place = (b: BuiltPolicy | undefined) => {
      if (b?.isolation) namespaces.add(b.isolation.namespace);
      for (const r of b?.rules ?? []) {
        if (r.tier === 'np' && 'name' in r.subject.namespaces) namespaces.add(r.subject.namespaces.name);
        else subjects.add(r.subject);
      }
    };
    const keys: string[] = [];
    for (const [k, { built }] of engine.policies) if (this.built.get(k) !== built) keys.push(k);
    for (const k of this.built.keys()) if (!engine.policies.has(k)) keys.push(k);
    for (const k of keys) {
      place(this.built.get(k));
      place(engine.policies.get(k)?.built);
    }
    const list = [...subjects];
    return {
      keys,
      namespaces,
      affects: (s) => namespaces.has(s.namespace) || selectsSet(list, s),
    };
  }

  /** Only the label sets `scope` affects can change: rebuilds their objects; returns those objects. */
  private rescope(engine: NetpolEngine, { keys, namespaces, affects }: PolicyScope): string[] {
    this.policyRevision = engine.policyRevision;
    this.built = builtPolicies(engine);
    if (this.unanalysed !== 'all') for (const ns of namespaces) this.unanalysed.add(ns);
    const witnesses = this.witnesses!;
    witnesses.sync(engine, this.sets);
    this.builder = new EffectiveBuilder(engine, (p) => witnesses.selectsNone(p));
    this.selecting!.refresh(engine, keys, [...this.sets.values()]);
    const changed: string[] = [];
    for (const s of this.sets.values())
      if (affects(s)) {
        const key = effectiveKey(s);
        this.effectives.set(key, this.builder.build(s));
        changed.push(key);
        // a NetworkPolicy rule is dead or live by the rules of its own namespace's pods: theirs to redo
        if (this.unanalysed !== 'all') this.unanalysed.add(s.namespace);
      }
    return changed;
  }

  /**
   * The exact analysis of `namespaces` only, merged with the last findings of the others: exact when
   * only policies local to them changed since (the pods are as analysed, and a NetworkPolicy's dead
   * rules and entry budget read only its namespace's policies). Undefined when the last or this
   * analysis stopped at its evaluation budget: then the whole analysis runs.
   */
  private reanalyse(
    engine: NetpolEngine,
    budget: number,
    namespaces: Set<string>,
  ): LintFinding[] | undefined {
    const stopped = (l: LintFinding[]) => l.some((f) => f.policy === '-');
    if (stopped(this.population)) return undefined;
    const found = lintPopulation(engine, budget, namespaces);
    if (stopped(found)) return undefined;
    const inScope = (policy: string) => {
      const parts = policy.split('/');
      return parts.length === 3 && namespaces.has(parts[1]!);
    };
    return [...this.population.filter((f) => !inScope(f.policy)), ...found];
  }

  /** Label sets appeared or went, the rules are the same: returns the objects that changed. */
  private patch(engine: NetpolEngine): string[] | undefined {
    const next = liveLabelSets(engine);
    const added = [...next.keys()].filter((k) => !this.sets.has(k));
    const removed = [...this.sets.keys()].filter((k) => !next.has(k));
    const before = this.sets;
    this.sets = next;
    for (const k of removed) this.selecting!.add(before.get(k)!, -1);
    for (const k of added) this.selecting!.add(next.get(k)!, 1);
    if (this.witnesses!.update(next, added, removed)) {
      // a peer started or stopped selecting any pod: every object naming it says so (rare)
      const witnesses = this.witnesses!;
      this.builder = new EffectiveBuilder(engine, (p) => witnesses.selectsNone(p));
      this.effectives = new Map([...next.values()].map((s) => [effectiveKey(s), this.builder!.build(s)]));
      return undefined;
    }
    const changed = new Set<string>();
    for (const k of removed) {
      const key = effectiveKey(before.get(k)!);
      this.effectives.delete(key);
      changed.add(key);
    }
    for (const k of added) {
      const s = next.get(k)!;
      this.effectives.set(effectiveKey(s), this.builder!.build(s));
      changed.add(effectiveKey(s));
    }
    return [...changed];
  }

  /** Brings the desired state up to date with a flushed engine; `full` recomputes everything. */
  update(engine: NetpolEngine, full = false): PublishedUpdate {
    const out: PublishedUpdate = {
      effectives: false,
      conditions: false,
      ms: { effectives: 0, structure: 0, population: 0, conditions: 0 },
    };
    const podIds = podIdentities(engine);
    const inputs = `${engine.policyRevision}|${podIds}`;
    if (full || inputs !== this.inputs) {
      this.inputs = inputs;
      let t = performance.now();
      const policies =
        full || !this.builder || engine.policyRevision === this.policyRevision
          ? undefined
          : this.changedPolicies(engine);
      if (full || !this.builder || (engine.policyRevision !== this.policyRevision && !policies)) {
        this.rebuild(engine);
      } else {
        const changed = new Set(policies ? this.rescope(engine, policies) : []);
        // identities moved (an ANP's networks split them differently): the analysis runs whole
        if (podIds !== this.podIds) this.unanalysed = 'all';
        const patched = podIds === this.podIds ? [] : this.patch(engine);
        out.changed = patched && [...new Set([...changed, ...patched])];
      }
      this.podIds = podIds;
      out.ms.effectives = performance.now() - t;
      t = performance.now();
      this.structure = lintStructure(engine);
      out.ms.structure = performance.now() - t;
      out.effectives = out.changed === undefined || out.changed.length > 0;
      out.conditions = true;
    }
    const now = this.opts.now?.() ?? Date.now();
    const a = this.analysed;
    const stale = !a || a.policies !== engine.policyRevision || a.population !== engine.populationRevision;
    if (full || stale) {
      const due = a ? a.at + (this.opts.analysisIntervalMs ?? DEFAULT_ANALYSIS_INTERVAL_MS) : now;
      if (full || !a || a.policies !== engine.policyRevision || now >= due) {
        const t = performance.now();
        const budget = this.opts.entryBudget ?? DEFAULT_NAMESPACE_ENTRY_BUDGET;
        const scoped =
          !full && a && a.population === engine.populationRevision && this.unanalysed !== 'all'
            ? this.reanalyse(engine, budget, this.unanalysed)
            : undefined;
        const found = scoped ?? lintPopulation(engine, budget);
        out.ms.population = performance.now() - t;
        this.unanalysed = new Set();
        // a scoped analysis keeps the time of the last whole one: pod churn waits as long as before
        this.analysed = {
          policies: engine.policyRevision,
          population: engine.populationRevision,
          at: scoped ? a!.at : now,
        };
        // what the conditions say of them (counts that move with every pod are not part of it)
        const said = (l: LintFinding[]) => JSON.stringify(l.map((f) => [f.policy, f.summary ?? f.message]));
        if (said(found) !== said(this.population)) {
          this.population = found;
          out.conditions = true;
        }
      } else out.analysisDueInMs = due - now;
    }
    if (out.conditions) {
      const t = performance.now();
      this.conditions = networkPolicyConditions(
        engine,
        [...this.structure, ...this.population],
        this.selecting,
      );
      out.ms.conditions = performance.now() - t;
    }
    return out;
  }
}

/** The policies' built rules by key (what `changedPolicies` compares). */
function builtPolicies(engine: NetpolEngine): Map<string, BuiltPolicy> {
  return new Map([...engine.policies].map(([k, p]) => [k, p.built]));
}

/** The live pod identities, in order: what the published rules read of the pods. */
function podIdentities(engine: NetpolEngine): string {
  const ids: number[] = [];
  for (const i of engine.identities.values()) if (i.kind === 'pod') ids.push(i.id);
  return ids.sort((a, b) => a - b).join(',');
}
