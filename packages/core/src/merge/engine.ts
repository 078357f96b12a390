// The incremental D/O engine for one policy kind. It indexes policies by the objects they target,
// marks exactly the paths a change can affect, and on flush() re-folds only those paths. Paths whose
// ordered chain of policies is identical share one fold (and one result object).
import { isEqual } from 'lodash-es';
import type { PolicyKind } from '../kind.ts';
import { objectKeysOfPath, Topology, type TopologyDelta } from '../topology/topology.ts';
import type {
  GatewayClassObject,
  GatewayObject,
  NamespaceObject,
  PathRef,
  RouteObject,
} from '../topology/types.ts';
import { type ChainResult, resolveChain } from './fold.ts';
import { normalizePolicy } from './normalize.ts';
import { type ChainLink, compareAge, foldOrder } from './order.ts';
import type { NormalizedPolicy, PolicyObject } from './policy.ts';

export interface PolicyState {
  object: PolicyObject;
  sequence: number;
  /** Bumped whenever the normalized content changes; part of the chain cache key. */
  revision: number;
  policy?: NormalizedPolicy;
  errors: string[];
}

export interface FlushReport {
  /** Paths whose effective result object changed (added or re-folded to a different chain). */
  changed: string[];
  removed: string[];
  /** Paths examined. */
  recomputed: number;
  /** Folds actually run (cache misses). */
  folds: number;
  /** Policies whose status may have changed. */
  policies: string[];
}

interface CachedChain {
  result: ChainResult;
  refs: number;
}

export class PolicyEngine {
  readonly topology: Topology;
  private readonly policies = new Map<string, PolicyState>();
  private readonly byTarget = new Map<string, Set<string>>();
  private readonly pathChain = new Map<string, string>();
  private readonly chains = new Map<string, CachedChain>();
  private readonly dirtyPaths = new Set<string>();
  private readonly removedPaths = new Set<string>();
  private readonly dirtyPolicies = new Set<string>();
  /** Per object key: the chain-key fragment of the policies attached there (cleared on change). */
  private readonly groupKeys = new Map<string, string>();
  private nextSequence = 0;

  readonly kind: PolicyKind;

  constructor(kind: PolicyKind, topology?: Topology) {
    this.kind = kind;
    this.topology = topology ?? new Topology();
    for (const pk of this.topology.paths.keys()) this.dirtyPaths.add(pk);
  }

  // ---- topology changes -------------------------------------------------------------------------

  upsertGatewayClass(c: GatewayClassObject): void {
    this.applyTopology(this.topology.upsertClass(c));
  }
  removeGatewayClass(name: string): void {
    this.applyTopology(this.topology.removeClass(name));
  }
  upsertGateway(gw: GatewayObject): void {
    this.applyTopology(this.topology.upsertGateway(gw));
  }
  removeGateway(namespace: string, name: string): void {
    this.applyTopology(this.topology.removeGateway(namespace, name));
  }
  upsertRoute(route: RouteObject): void {
    this.applyTopology(this.topology.upsertRoute(route));
  }
  removeRoute(kind: string, namespace: string, name: string): void {
    this.applyTopology(this.topology.removeRoute(kind, namespace, name));
  }
  upsertNamespace(ns: NamespaceObject): void {
    this.applyTopology(this.topology.upsertNamespace(ns));
  }

  /** Feed a delta from a Topology shared with other engines. */
  applyTopology(delta: TopologyDelta): void {
    for (const pk of delta.removed) {
      this.dirtyPaths.delete(pk);
      this.removedPaths.add(pk);
    }
    for (const pk of delta.added) {
      this.removedPaths.delete(pk);
      this.dirtyPaths.add(pk);
    }
    for (const key of delta.objects)
      for (const id of this.byTarget.get(key) ?? []) this.dirtyPolicies.add(id);
    for (const pk of [...delta.added, ...delta.removed]) {
      const p = this.topology.paths.get(pk);
      if (p)
        for (const ok of objectKeysOfPath(p))
          for (const id of this.byTarget.get(ok) ?? []) this.dirtyPolicies.add(id);
    }
  }

  // ---- policy changes ---------------------------------------------------------------------------

  upsertPolicy(obj: PolicyObject): void {
    const ns = obj.metadata.namespace ?? 'default';
    const id = `${obj.kind}:${ns}/${obj.metadata.name}`;
    const prev = this.policies.get(id);
    const sequence = prev?.sequence ?? this.nextSequence++;
    const res = normalizePolicy(this.kind, obj, sequence);
    const next: PolicyState = {
      object: obj,
      sequence,
      revision: prev?.revision ?? 0,
      errors: res.ok ? [] : res.errors,
    };
    if (res.ok) next.policy = res.policy;
    if (prev && isEqual(prev.policy?.targets, next.policy?.targets) && samePolicyContent(prev, next)) {
      this.policies.set(id, { ...next, revision: prev.revision });
      return;
    }
    next.revision = (prev?.revision ?? 0) + 1;
    if (prev) this.unindex(id, prev);
    this.policies.set(id, next);
    this.index(id, next);
    this.dirtyPolicies.add(id);
  }

  removePolicy(kind: string, namespace: string, name: string): void {
    const id = `${kind}:${namespace}/${name}`;
    const prev = this.policies.get(id);
    if (!prev) return;
    this.unindex(id, prev);
    this.policies.delete(id);
    this.dirtyPolicies.add(id);
  }

  private targetKeys(state: PolicyState): string[] {
    return state.policy ? state.policy.targets.map((t) => t.key) : [];
  }

  private index(id: string, state: PolicyState): void {
    for (const key of this.targetKeys(state)) {
      let s = this.byTarget.get(key);
      if (!s) this.byTarget.set(key, (s = new Set()));
      s.add(id);
      this.markTarget(key);
    }
  }

  private unindex(id: string, state: PolicyState): void {
    for (const key of this.targetKeys(state)) {
      const s = this.byTarget.get(key);
      s?.delete(id);
      if (s?.size === 0) this.byTarget.delete(key);
      this.markTarget(key);
    }
  }

  /** A change at a target touches its paths, and the status of every policy sharing a path with it. */
  private markTarget(key: string): void {
    this.groupKeys.delete(key);
    for (const pk of this.topology.pathsThrough(key)) this.dirtyPaths.add(pk);
    for (const id of this.byTarget.get(key) ?? []) this.dirtyPolicies.add(id);
  }

  // ---- resolution -------------------------------------------------------------------------------

  /** Policies attached at one object key, with the kind's 1:1 rule applied. */
  private attached(key: string): NormalizedPolicy[] {
    const ids = this.byTarget.get(key);
    if (!ids) return [];
    const out: NormalizedPolicy[] = [];
    for (const id of ids) {
      const p = this.policies.get(id)?.policy;
      if (p) out.push(p);
    }
    const max = this.kind.maxPoliciesPerTarget;
    if (max !== undefined && out.length > max) return out.sort(compareAge).slice(0, max);
    return out;
  }

  /** The ordered chain of policies reaching a path, least established first. */
  chainOf(path: PathRef): ChainLink[] {
    const links: ChainLink[] = [];
    const keys = objectKeysOfPath(path);
    const seen = new Map<string, ChainLink>();
    keys.forEach((key, level) => {
      for (const policy of this.attached(key)) {
        // A policy reaching one path through two of its targets counts once, at the most specific.
        const had = seen.get(policy.id);
        if (had) had.level = level as ChainLink['level'];
        else {
          const link = { policy, level: level as ChainLink['level'] };
          seen.set(policy.id, link);
          links.push(link);
        }
      }
    });
    return foldOrder(links);
  }

  /** Fragment of the chain key for one object key: attached policies and revisions, newest first. */
  private groupKey(key: string): string {
    let g = this.groupKeys.get(key);
    if (g === undefined) {
      g = '';
      for (const p of this.attached(key).sort((a, b) => compareAge(b, a)))
        g += `${p.id}@${this.policies.get(p.id)!.revision},`;
      this.groupKeys.set(key, g);
    }
    return g;
  }

  /** Identical keys mean identical ordered chains, hence identical fold results. */
  private chainKey(path: PathRef): string {
    const k = objectKeysOfPath(path);
    return `${this.groupKey(k[4])}|${this.groupKey(k[3])}|${this.groupKey(k[2])}|${this.groupKey(k[1])}|${this.groupKey(k[0])}`;
  }

  /** Re-folds every dirty path. Returns what changed; idempotent when nothing is dirty. */
  flush(): FlushReport {
    const report: FlushReport = { changed: [], removed: [], recomputed: 0, folds: 0, policies: [] };
    for (const pk of this.removedPaths) {
      if (this.topology.paths.has(pk)) continue;
      const ck = this.pathChain.get(pk);
      if (ck !== undefined) {
        this.release(ck);
        this.pathChain.delete(pk);
        report.removed.push(pk);
      }
    }
    this.removedPaths.clear();
    for (const pk of this.dirtyPaths) {
      const path = this.topology.paths.get(pk);
      if (!path) continue;
      report.recomputed++;
      const ck = this.chainKey(path);
      const old = this.pathChain.get(pk);
      if (old === ck) continue;
      let cached = this.chains.get(ck);
      if (!cached) {
        cached = { result: resolveChain(this.chainOf(path), this.kind.sections), refs: 0 };
        this.chains.set(ck, cached);
        report.folds++;
      }
      cached.refs++;
      if (old !== undefined) this.release(old);
      this.pathChain.set(pk, ck);
      report.changed.push(pk);
    }
    this.dirtyPaths.clear();
    report.policies = [...this.dirtyPolicies];
    this.dirtyPolicies.clear();
    return report;
  }

  private release(ck: string): void {
    const c = this.chains.get(ck);
    if (c && --c.refs === 0) this.chains.delete(ck);
  }

  // ---- reads ------------------------------------------------------------------------------------

  result(pathKey: string): ChainResult | undefined {
    const ck = this.pathChain.get(pathKey);
    return ck === undefined ? undefined : this.chains.get(ck)?.result;
  }

  /** Every resolved path with its result (results are shared between paths with the same chain). */
  *results(): IterableIterator<[PathRef, ChainResult]> {
    for (const [pk, ck] of this.pathChain) {
      const path = this.topology.paths.get(pk);
      const c = this.chains.get(ck);
      if (path && c) yield [path, c.result];
    }
  }

  get pathCount(): number {
    return this.pathChain.size;
  }

  get chainCount(): number {
    return this.chains.size;
  }

  policy(id: string): PolicyState | undefined {
    return this.policies.get(id);
  }

  policyIds(): IterableIterator<string> {
    return this.policies.keys();
  }

  /** Ids of the policies attached at an object key (valid ones, before the 1:1 rule). */
  attachedAt(key: string): string[] {
    return [...(this.byTarget.get(key) ?? [])];
  }

  /** Whether a policy is cut out at `key` by the kind's 1:1 rule. */
  isConflictedAt(id: string, key: string): boolean {
    return !this.attached(key).some((p) => p.id === id);
  }

  /** Distinct results on the paths a policy reaches, with how many paths share each. */
  reach(id: string): { paths: string[]; results: Map<ChainResult, string[]> } {
    const state = this.policies.get(id);
    const paths = new Set<string>();
    for (const key of state ? this.targetKeys(state) : [])
      for (const pk of this.topology.pathsThrough(key)) paths.add(pk);
    const results = new Map<ChainResult, string[]>();
    for (const pk of paths) {
      const r = this.result(pk);
      if (!r) continue;
      let list = results.get(r);
      if (!list) results.set(r, (list = []));
      list.push(pk);
    }
    return { paths: [...paths], results };
  }
}

function samePolicyContent(a: PolicyState, b: PolicyState): boolean {
  if (!isEqual(a.errors, b.errors)) return false;
  if (!a.policy || !b.policy) return a.policy === b.policy;
  const strip = (p: NormalizedPolicy) => ({
    ...p,
    generation: undefined,
    blocks: p.blocks.map((bl) => ({ ...bl, condition: bl.condition?.source })),
  });
  return isEqual(strip(a.policy), strip(b.policy));
}
