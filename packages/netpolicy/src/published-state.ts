// What the netpolicy-controller should publish, kept up to date cheaply. Pure: the engine and a clock
// in, the desired EffectivePolicies and policy conditions out, plus what moved (so the controller
// compares only that with the live objects).
//
// The EffectivePolicies and most conditions depend on the rules and on the pod identities only
// (namespace, namespace labels, pod labels, named ports): pod churn inside existing identities, the
// common event, recomputes nothing. The exact analyses of the cluster as it is (NetworkPolicy rules
// made dead by admin rules, entry budgets per node) read every pod's addresses: they run at once when
// a policy changes, and at most once per `analysisIntervalMs` when only pods, nodes or namespaces do.
import { DEFAULT_NAMESPACE_ENTRY_BUDGET } from './budget.ts';
import type { NetpolEngine } from './engine.ts';
import { type LintFinding, lintPopulation, lintStructure } from './lint.ts';
import {
  type NetworkEffective,
  networkEffectives,
  networkPolicyConditions,
  type PolicyCondition,
} from './published.ts';

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
  /** The desired EffectivePolicies were recomputed: every one must be compared with the live ones. */
  effectives: boolean;
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
  private structure: LintFinding[] = [];
  private population: LintFinding[] = [];
  private analysed?: { policies: number; population: number; at: number };

  constructor(opts: PublishedStateOptions = {}) {
    this.opts = opts;
  }

  /** Brings the desired state up to date with a flushed engine; `full` recomputes everything. */
  update(engine: NetpolEngine, full = false): PublishedUpdate {
    const out: PublishedUpdate = {
      effectives: false,
      conditions: false,
      ms: { effectives: 0, structure: 0, population: 0, conditions: 0 },
    };
    const inputs = `${engine.policyRevision}|${podIdentities(engine)}`;
    if (full || inputs !== this.inputs) {
      this.inputs = inputs;
      let t = performance.now();
      this.effectives = new Map(networkEffectives(engine).map((e) => [`${e.namespace}/${e.name}`, e]));
      out.ms.effectives = performance.now() - t;
      t = performance.now();
      this.structure = lintStructure(engine);
      out.ms.structure = performance.now() - t;
      out.effectives = true;
      out.conditions = true;
    }
    const now = this.opts.now?.() ?? Date.now();
    const a = this.analysed;
    const stale = !a || a.policies !== engine.policyRevision || a.population !== engine.populationRevision;
    if (full || stale) {
      const due = a ? a.at + (this.opts.analysisIntervalMs ?? DEFAULT_ANALYSIS_INTERVAL_MS) : now;
      if (full || !a || a.policies !== engine.policyRevision || now >= due) {
        const t = performance.now();
        const found = lintPopulation(engine, this.opts.entryBudget ?? DEFAULT_NAMESPACE_ENTRY_BUDGET);
        out.ms.population = performance.now() - t;
        this.analysed = { policies: engine.policyRevision, population: engine.populationRevision, at: now };
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
      this.conditions = networkPolicyConditions(engine, [...this.structure, ...this.population]);
      out.ms.conditions = performance.now() - t;
    }
    return out;
  }
}

/** The live pod identities, in order: what the published rules read of the pods. */
function podIdentities(engine: NetpolEngine): string {
  const ids: number[] = [];
  for (const i of engine.identities.values()) if (i.kind === 'pod') ids.push(i.id);
  return ids.sort((a, b) => a - b).join(',');
}
