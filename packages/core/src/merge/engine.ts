// The incremental D/O engine for one policy kind. It indexes policies by the objects they target,
// marks the routes a change can affect, and on flush() re-chains only their paths. Paths whose
// ordered chain of policies is identical share one fold (and one result object).
import { isEqual } from 'lodash-es';
import type { PolicyKind } from '../kind.ts';
import { objectKeyLevel, objectKeysOfPath, Topology, type TopologyDelta } from '../topology/topology.ts';
import {
  type GatewayClassObject,
  type GatewayObject,
  Level,
  type NamespaceObject,
  type PathRef,
  type RouteObject,
  routeKey,
} from '../topology/types.ts';
import { applyFailClosed, type ChainResult, resolveChain } from './fold.ts';
import { normalizePolicy, targetKeysOfInvalid } from './normalize.ts';
import { type ChainLink, compareAge, foldOrder } from './order.ts';
import type { NormalizedPolicy, PolicyObject, PolicyRef } from './policy.ts';

export interface PolicyState {
  object: PolicyObject;
  sequence: number;
  /** Bumped whenever the normalized content changes; part of the chain cache key. */
  revision: number;
  policy?: NormalizedPolicy;
  errors: string[];
  /** An invalid policy's targets as far as its spec names them: the paths it would reach know it. */
  invalidTargets?: string[];
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
  /** The fragment ids the chain key is made of (rule, route, listener, gateway, class). */
  fragments: number[];
}

export class PolicyEngine {
  readonly topology: Topology;
  private readonly policies = new Map<string, PolicyState>();
  private readonly byTarget = new Map<string, Set<string>>();
  private readonly pathChain = new Map<string, string>();
  private readonly chains = new Map<string, CachedChain>();
  /** Routes whose paths must be re-chained on flush (a route's paths share most of their chain). */
  private readonly dirtyRoutes = new Set<string>();
  private readonly removedPaths = new Set<string>();
  private readonly dirtyPolicies = new Set<string>();
  /** Per object key: the interned id of its chain-key fragment (cleared on change). */
  private readonly groupKeys = new Map<string, number>();
  /** Fragment (attached policy ids @ revisions, in fold order) -> small id, so chain keys stay short. */
  private readonly fragments = new Map<string, number>([['', 0]]);
  /** Policy ids of each fragment, by fragment id: what a changed path tells status to recompute. */
  private readonly fragmentPolicies: string[][] = [[]];
  private nextSequence = 0;
  private revisions = 0;

  readonly kind: PolicyKind;

  constructor(kind: PolicyKind, topology?: Topology) {
    this.kind = kind;
    this.topology = topology ?? new Topology();
    for (const p of this.topology.paths.values())
      this.dirtyRoutes.add(routeKey(p.route.kind, p.route.namespace, p.route.name));
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
    for (const pk of delta.removed) this.removedPaths.add(pk);
    for (const r of delta.routes) this.dirtyRoutes.add(r);
    // Policies at objects that appeared or vanished change status (TargetNotFound and back).
    for (const key of delta.objects) {
      const ids = this.byTarget.get(key);
      if (ids) for (const id of ids) this.dirtyPolicies.add(id);
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
    else next.invalidTargets = targetKeysOfInvalid(this.kind, obj);
    if (
      prev &&
      isEqual(prev.policy?.targets, next.policy?.targets) &&
      isEqual(prev.invalidTargets, next.invalidTargets) &&
      samePolicyContent(prev, next)
    ) {
      this.policies.set(id, { ...next, revision: prev.revision });
      return;
    }
    // Engine-wide and never reused: a policy deleted and created again must not match cached chains.
    next.revision = ++this.revisions;
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
    return state.policy ? state.policy.targets.map((t) => t.key) : (state.invalidTargets ?? []);
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
    for (const r of this.topology.routesThrough(key)) this.dirtyRoutes.add(r);
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

  /** Invalid policies whose spec names a target on the path. */
  private invalidOn(path: PathRef): { refs: PolicyRef[]; level: Level } {
    const out: PolicyRef[] = [];
    let level: Level = Level.RouteRule;
    for (const key of objectKeysOfPath(path))
      for (const id of this.byTarget.get(key) ?? []) {
        const s = this.policies.get(id);
        if (!s || s.policy || out.some((r) => `${r.kind}:${r.namespace}/${r.name}` === id)) continue;
        if (out.length === 0) level = objectKeyLevel(key);
        out.push({
          kind: s.object.kind,
          namespace: s.object.metadata.namespace ?? 'default',
          name: s.object.metadata.name,
        });
      }
    return { refs: out, level };
  }

  /** Interned fragment of the chain key for one object key: attached policies and revisions, newest first. */
  private groupKey(key: string): number {
    if (!this.byTarget.has(key)) return 0; // nothing attached: the empty fragment, id 0
    let id = this.groupKeys.get(key);
    if (id === undefined) {
      let g = '';
      const ids: string[] = [];
      for (const p of this.attached(key).sort((a, b) => compareAge(b, a))) {
        g += `${p.id}@${this.policies.get(p.id)!.revision},`;
        ids.push(p.id);
      }
      // invalid policies at the key are part of the chain too: their paths know them (fail closed)
      for (const id of [...this.byTarget.get(key)!].sort()) {
        const s = this.policies.get(id);
        if (s && !s.policy) {
          g += `!${id}@${s.revision},`;
          ids.push(id);
        }
      }
      id = this.fragments.get(g);
      if (id === undefined) {
        this.fragments.set(g, (id = this.fragments.size));
        // the fragment's policies: when a chain with it appears or vanishes, their reach changed
        this.fragmentPolicies[id] = ids;
      }
      this.groupKeys.set(key, id);
    }
    return id;
  }

  /** Re-folds the paths of every dirty route. Returns what changed; idempotent when nothing is dirty. */
  flush(): FlushReport {
    const report: FlushReport = { changed: [], removed: [], recomputed: 0, folds: 0, policies: [] };
    // Fragments on chains that appeared or vanished: their policies' reach changed.
    const touched = new Set<number>();
    const touch = (ck: string) => {
      for (const f of this.chains.get(ck)!.fragments) touched.add(f);
    };
    for (const pk of this.removedPaths) {
      if (this.topology.paths.has(pk)) continue;
      const ck = this.pathChain.get(pk);
      if (ck !== undefined) {
        touch(ck);
        this.release(ck);
        this.pathChain.delete(pk);
        report.removed.push(pk);
      }
    }
    this.removedPaths.clear();
    const upper = new Map<string, { text: string; g: readonly [number, number, number] }>();
    for (const route of this.dirtyRoutes) {
      const pks = this.topology.routePathKeys(route);
      if (pks.size === 0) continue;
      // Identical keys mean identical ordered chains, hence identical fold results.
      const gRoute = this.groupKey(route);
      for (const pk of pks) {
        const k = this.topology.objectKeys(pk)!;
        report.recomputed++;
        const g4 = this.groupKey(k[4]);
        // The listener key determines the gateway and class: one lookup for all three per flush.
        let up = upper.get(k[2]);
        if (!up) {
          const g = [this.groupKey(k[2]), this.groupKey(k[1]), this.groupKey(k[0])] as const;
          upper.set(k[2], (up = { text: `${g[0]}|${g[1]}|${g[2]}`, g }));
        }
        const [g2, g1, g0] = up.g;
        const ck = `${g4}|${gRoute}|${up.text}`;
        const old = this.pathChain.get(pk);
        if (old === ck) continue;
        let cached = this.chains.get(ck);
        if (!cached) {
          const path = this.topology.paths.get(pk)!;
          const folded = resolveChain(this.chainOf(path), this.kind.sections);
          const invalid = this.invalidOn(path);
          folded.invalid = invalid.refs;
          const result = applyFailClosed(folded, this.kind.failClosed, invalid.level);
          cached = { result, refs: 0, fragments: [g4, gRoute, g2, g1, g0] };
          this.chains.set(ck, cached);
          report.folds++;
        }
        cached.refs++;
        if (old !== undefined) {
          touch(old);
          this.release(old);
        }
        for (const f of cached.fragments) touched.add(f);
        this.pathChain.set(pk, ck);
        report.changed.push(pk);
      }
    }
    this.dirtyRoutes.clear();
    for (const f of touched) for (const id of this.fragmentPolicies[f] ?? []) this.dirtyPolicies.add(id);
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
    return [...(this.byTarget.get(key) ?? [])].filter((id) => this.policies.get(id)?.policy);
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
