// The network-policy engine: cluster objects in, identities, ipcache and per-endpoint MapState tables
// out, kept incrementally. Endpoints with the same effective rule set (in practice: the same identity,
// i.e. replicas) share one table. A change is applied to every affected selector and table before
// flush() returns its diff, so no intermediate state is ever emitted.
import { createHash } from 'node:crypto';
import { matchesSelector } from '@cascade/core';
import { contains, hostPrefix, type Prefix, parseCidr, prefixKey, WORLD4, WORLD6 } from './cidr.ts';
import {
  cidrIdentityKey,
  ID,
  IdentityAllocator,
  type IdentityInfo,
  isPodIdentity,
  nodeIdentityKey,
  podIdentityKey,
} from './identities.ts';
import { type Layer, lowerLayer } from './lower.ts';
import { keyString, type MapState, type MapStateEntry, type MapStateKey } from './mapstate.ts';
import type { Namespace, NetPolicyObject, Node, Pod } from './model.ts';
import { MAX_ADMIN_RANK } from './precedence.ts';
import {
  type BuiltPolicy,
  buildPolicy,
  compareRules,
  type Direction,
  type Isolation,
  type Rule,
} from './rules.ts';
import { IdentityIndex, peerSelects, type Selection, subjectSelects } from './selection.ts';
import { composeTiers, type TieredRules } from './tiers.ts';

export const DIRECTIONS: readonly Direction[] = ['ingress', 'egress'];
export const LAYERS: readonly Layer[] = ['admin', 'lower'];

function sameLayers(
  a: Record<Direction, Record<Layer, string>>,
  b: Record<Direction, Record<Layer, string>>,
): boolean {
  return DIRECTIONS.every((d) => LAYERS.every((l) => a[d][l] === b[d][l]));
}

export interface Table {
  id: string;
  direction: Direction;
  layer: Layer;
  tiers: TieredRules;
  state: MapState;
  /** Identities (subjects) using it. */
  subjects: Set<number>;
}

export interface IpcacheEntry {
  prefix: Prefix;
  identity: number;
}

export interface FlushDiff {
  /** Tables created / deleted / whose entries changed in place, with entry counts. */
  created: number;
  deleted: number;
  updated: number;
  entriesAdded: number;
  entriesRemoved: number;
  /** Endpoints that now point at another table. */
  switched: number;
  identitiesAdded: number[];
  identitiesRemoved: number[];
  recomputedTables: number;
}

const podKey = (p: { namespace: string; name: string }) => `${p.namespace}/${p.name}`;

export class NetpolEngine {
  readonly namespaces = new Map<string, Namespace>();
  readonly pods = new Map<string, Pod>();
  readonly nodes = new Map<string, Node>();
  readonly policies = new Map<string, { obj: NetPolicyObject; built: BuiltPolicy; revision: number }>();

  readonly allocator = new IdentityAllocator();
  readonly identities = new Map<number, IdentityInfo>();
  readonly podIdentity = new Map<string, number>();
  readonly nodeIdentity = new Map<string, number>();
  private readonly members = new Map<number, Set<string>>();

  rules: { admin: Rule[]; np: Rule[]; isolation: Isolation[]; baseline: Rule[] } = {
    admin: [],
    np: [],
    isolation: [],
    baseline: [],
  };
  private readonly selections = new Map<string, Selection>();
  /** Subject identity -> table id per direction. */
  readonly endpointTables = new Map<number, Record<Direction, Record<Layer, string>>>();
  readonly tables = new Map<string, Table>();
  private byPortName = new Map<string, number[]>();
  private index = new IdentityIndex([]);
  /** Rules grouped by the subject they share (one ANP / CNP / BANP / NetworkPolicy). */
  private groups: Group[] = [];
  private isolationByNs = new Map<string, Isolation[]>();
  private clusterGroups: NetpolEngine['groups'] = [];
  private groupsByNs = new Map<string, NetpolEngine['groups']>();
  private networks: Prefix[] = [];
  private revision = 0;

  private dirtyPods = new Set<string>();
  private dirtyNodes = new Set<string>();
  /** Policies changed since the last flush, with what they were before (null: new). */
  private changedPolicies = new Map<string, BuiltPolicy | null>();
  private everything = true;

  // ---- inputs -----------------------------------------------------------------------------------

  upsertNamespace(ns: Namespace): void {
    this.ipcacheMemo.clear();
    this.namespaces.set(ns.name, ns);
    for (const [k, p] of this.pods) if (p.namespace === ns.name) this.dirtyPods.add(k);
  }

  upsertPod(p: Pod): void {
    this.ipcacheMemo.clear();
    this.pods.set(podKey(p), p);
    this.dirtyPods.add(podKey(p));
  }

  removePod(namespace: string, name: string): void {
    this.ipcacheMemo.clear();
    const k = `${namespace}/${name}`;
    if (this.pods.delete(k)) this.dirtyPods.add(k);
  }

  upsertNode(n: Node): void {
    this.ipcacheMemo.clear();
    this.nodes.set(n.name, n);
    this.dirtyNodes.add(n.name);
  }

  upsertPolicy(obj: NetPolicyObject): BuiltPolicy {
    const built = buildPolicy(obj);
    const prev = this.policies.get(built.key);
    if (prev && JSON.stringify(prev.obj.spec) === JSON.stringify(obj.spec)) return prev.built;
    this.policies.set(built.key, { obj, built, revision: ++this.revision });
    if (!this.changedPolicies.has(built.key)) this.changedPolicies.set(built.key, prev?.built ?? null);
    return built;
  }

  removePolicy(key: string): void {
    const prev = this.policies.get(key);
    if (!prev) return;
    this.policies.delete(key);
    if (!this.changedPolicies.has(key)) this.changedPolicies.set(key, prev.built);
  }

  /** Pod identities whose applicable rules a policy change can alter: its old and new subjects. */
  private affectedSubjects(): Set<number> {
    const out = new Set<number>();
    const subjectsOf = (b: BuiltPolicy | null | undefined) => {
      if (!b) return [];
      const list: ((i: IdentityInfo) => boolean)[] = [];
      const seen = new Set<Rule['subject']>();
      for (const r of b.rules) {
        if (seen.has(r.subject)) continue;
        seen.add(r.subject);
        list.push((i) => subjectSelects(r.subject, i));
      }
      if (b.isolation) {
        const iso = b.isolation;
        list.push((i) => i.namespace === iso.namespace && matchesSelector(iso.subject, i.labels!));
      }
      return list;
    };
    for (const [key, prev] of this.changedPolicies) {
      const tests = [...subjectsOf(prev), ...subjectsOf(this.policies.get(key)?.built)];
      if (tests.length === 0) continue;
      for (const info of this.identities.values())
        if (info.kind === 'pod' && tests.some((t) => t(info))) out.add(info.id);
    }
    return out;
  }

  nsLabels = (ns: string): Record<string, string> =>
    this.namespaces.get(ns)?.labels ?? { 'kubernetes.io/metadata.name': ns };

  // ---- derived ----------------------------------------------------------------------------------

  private rebuildRules(): void {
    const all = [...this.policies.values()].map((p) => p.built);
    const admin = all.flatMap((b) => b.rules.filter((r) => r.tier === 'admin')).sort(compareRules);
    this.rules = {
      admin,
      np: all.flatMap((b) => b.rules.filter((r) => r.tier === 'np')),
      isolation: all.flatMap((b) => (b.isolation ? [b.isolation] : [])),
      baseline: all.flatMap((b) => b.rules.filter((r) => r.tier === 'baseline')).sort(compareRules),
    };
    this.egressNamedRules = [...admin, ...this.rules.np, ...this.rules.baseline].filter(
      (r) => r.direction === 'egress' && r.ports?.some((p) => p.kind === 'named'),
    );
    // Every prefix a pod-matching CIDR peer names (NetworkPolicy ipBlocks and their excepts too):
    // a pod's netparts are the most specific of these holding its address.
    const nets = new Map<string, Prefix>();
    for (const r of [...admin, ...this.rules.np, ...this.rules.baseline])
      for (const p of r.peers)
        if (p.kind === 'cidr' && p.pods) {
          nets.set(prefixKey(p.cidr), p.cidr);
          for (const e of p.except) nets.set(prefixKey(e), e);
        }
    this.networks = [...nets.values()];
  }

  private netparts(pod: Pod): string[] {
    const out: string[] = [];
    for (const ip of pod.ips) {
      const h = hostPrefix(ip);
      if (!h) continue;
      let best: Prefix | undefined;
      for (const n of this.networks) if (contains(n, h) && (!best || n.len > best.len)) best = n;
      if (best) out.push(prefixKey(best));
    }
    return out;
  }

  private podIdentityInfo(p: Pod): IdentityInfo {
    const nsLabels = this.nsLabels(p.namespace);
    const netparts = this.netparts(p);
    const key = podIdentityKey(p.namespace, nsLabels, p.labels, p.ports, netparts);
    return {
      id: this.allocator.allocate('pod', key),
      kind: 'pod',
      key,
      namespace: p.namespace,
      nsLabels,
      labels: p.labels,
      ports: p.ports.filter((x) => x.name),
      netparts,
    };
  }

  private addMember(info: IdentityInfo, member: string, added: number[]): void {
    let m = this.members.get(info.id);
    if (!m) {
      this.members.set(info.id, (m = new Set()));
      this.identities.set(info.id, info);
      added.push(info.id);
    }
    m.add(member);
  }

  private dropMember(id: number, member: string, removed: number[]): void {
    const m = this.members.get(id);
    if (!m) return;
    m.delete(member);
    if (m.size === 0) {
      this.members.delete(id);
      this.identities.delete(id);
      removed.push(id);
    }
  }

  /** CIDR identities for every prefix a rule names, and world. */
  private syncCidrIdentities(added: number[], removed: number[]): void {
    const want = new Map<string, Prefix>();
    for (const r of [...this.rules.admin, ...this.rules.np, ...this.rules.baseline]) {
      for (const p of r.peers) {
        if (p.kind !== 'cidr') continue;
        for (const c of [p.cidr, ...p.except]) if (c.len > 0) want.set(cidrIdentityKey(c), c);
      }
    }
    if (!this.identities.has(ID.WORLD)) {
      this.identities.set(ID.WORLD, { id: ID.WORLD, kind: 'world', key: 'world', prefix: WORLD4 });
      this.identities.set(ID.WORLD6, { id: ID.WORLD6, kind: 'world', key: 'world6', prefix: WORLD6 });
    }
    for (const [id, info] of [...this.identities]) {
      if (info.kind === 'cidr' && !want.has(info.key)) {
        this.identities.delete(id);
        removed.push(id);
      }
    }
    for (const [key, prefix] of [...want].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const id = this.allocator.allocate('cidr', key);
      if (!this.identities.has(id)) {
        this.identities.set(id, { id, kind: 'cidr', key, prefix });
        added.push(id);
      }
    }
  }

  /** The rule and peer index behind each cached selection key. */
  /** Egress rules with named ports: they expand wildcard peers per destination identity. */
  private egressNamedRules: Rule[] = [];
  private readonly selectionRules = new Map<string, SelectionEntry>();
  /** Cached selections of pod peers bound to one namespace, by it; and all the others. */
  private readonly selectionsByNs = new Map<string, Set<SelectionEntry>>();
  private readonly selectionsUnbound = new Set<SelectionEntry>();

  private forgetSelection(k: string): void {
    const e = this.selectionRules.get(k);
    this.selections.delete(k);
    this.selectionRules.delete(k);
    if (!e) return;
    const peer = e.rule.peers[e.index]!;
    if (peer.kind === 'pods' && 'name' in peer.namespaces)
      this.selectionsByNs.get(peer.namespaces.name)?.delete(e);
    else this.selectionsUnbound.delete(e);
  }

  private forgetAllSelections(): void {
    this.selections.clear();
    this.selectionRules.clear();
    this.selectionsByPolicy.clear();
    this.selectionsByNs.clear();
    this.selectionsUnbound.clear();
  }

  /** Policy key -> its cached selection keys (what a change of that policy invalidates). */
  private readonly selectionsByPolicy = new Map<string, Set<string>>();

  /** Selection cache keys per rule, built once (a key built per call costs more than the lookup). */
  private readonly selectionKeys = new WeakMap<Rule, string[]>();

  private selection(rule: Rule, i: number): Selection {
    let keys = this.selectionKeys.get(rule);
    if (!keys) this.selectionKeys.set(rule, (keys = rule.peers.map((_, j) => `${rule.id}@${j}`)));
    const k = keys[i]!;
    let s = this.selections.get(k);
    if (!s) {
      const pk = policyKeyOf(rule);
      let set = this.selectionsByPolicy.get(pk);
      if (!set) this.selectionsByPolicy.set(pk, (set = new Set()));
      set.add(k);
      s = this.index.select(rule.peers[i]!, rule.action);
      this.selections.set(k, s);
      const entry: SelectionEntry = { rule, index: i, s };
      this.selectionRules.set(k, entry);
      const peer = rule.peers[i]!;
      if (peer.kind === 'pods' && 'name' in peer.namespaces) {
        let b = this.selectionsByNs.get(peer.namespaces.name);
        if (!b) this.selectionsByNs.set(peer.namespaces.name, (b = new Set()));
        b.add(entry);
      } else this.selectionsUnbound.add(entry);
    }
    return s;
  }

  private rebuildGroups(): void {
    const byPolicy = new Map<string, Group>();
    // Group ids are only meaningful within one build: the tiers cached by them go with it.
    this.tiersByGroups = new Map();
    for (const r of [...this.rules.admin, ...this.rules.np, ...this.rules.baseline]) {
      const k = policyKeyOf(r);
      let g = byPolicy.get(k);
      if (!g) {
        g = { id: byPolicy.size, subject: r.subject, rules: [] };
        if ('name' in r.subject.namespaces) g.namespace = r.subject.namespaces.name;
        byPolicy.set(k, g);
      }
      g.rules.push(r);
    }
    this.groups = [...byPolicy.values()];
    // NetworkPolicy groups apply in their own namespace only: index them by it.
    this.clusterGroups = this.groups.filter((g) => g.namespace === undefined);
    this.groupsByNs = new Map();
    for (const g of this.groups) {
      if (g.namespace === undefined) continue;
      let l = this.groupsByNs.get(g.namespace);
      if (!l) this.groupsByNs.set(g.namespace, (l = []));
      l.push(g);
    }
    this.isolationByNs = new Map();
    for (const i of this.rules.isolation) {
      let l = this.isolationByNs.get(i.namespace);
      if (!l) this.isolationByNs.set(i.namespace, (l = []));
      l.push(i);
    }
  }

  /** `id@revision` per rule object: a rule object belongs to one build of its policy, so it never changes. */
  private readonly ruleRevs = new WeakMap<Rule, string>();
  private rev(r: Rule): string {
    let s = this.ruleRevs.get(r);
    if (s === undefined)
      this.ruleRevs.set(r, (s = `${r.id}@${this.policies.get(policyKeyOf(r))?.revision ?? 0}`));
    return s;
  }

  /** Tiered rules of an identity and direction; identities with the same rule lists share the fold. */
  private readonly tierCache = new Map<string, TieredRules>();
  /** Tiers by (direction, matched groups, matched isolations): identities matching the same share them. */
  private tiersByGroups = new Map<string, TieredRules>();
  private tiers(info: IdentityInfo, d: Direction, groups: Group[]): TieredRules {
    const iso = (this.isolationByNs.get(info.namespace!) ?? []).filter(
      (i) => i.directions.includes(d) && matchesSelector(i.subject, info.labels!),
    );
    const gkey = `${d}|${groups.map((g) => g.id).join(',')}|${iso.map((i) => i.policy).join(',')}`;
    let t = this.tiersByGroups.get(gkey);
    if (!t) this.tiersByGroups.set(gkey, (t = this.tiersOf(info, d, groups)));
    return t;
  }

  private tiersOf(info: IdentityInfo, d: Direction, groups: Group[]): TieredRules {
    const input = this.tierInput(info, d, groups);
    const rev = (r: Rule) => this.rev(r);
    const key = `${d}|${input.admin.map(rev).join(',')}|${input.isolation.map((i) => i.policy).join(',')}|${input.np.map(rev).join(',')}|${input.baseline.map(rev).join(',')}`;
    let t = this.tierCache.get(key);
    if (!t) {
      if (this.tierCache.size > 50_000) this.tierCache.clear();
      t = composeTiers(input);
      this.tierCache.set(key, t);
    }
    return t;
  }

  /** The policy groups whose subject selects an identity (the same for both directions). */
  private groupsOf(info: IdentityInfo): Group[] {
    const out: Group[] = [];
    for (const g of this.clusterGroups) if (subjectSelects(g.subject, info)) out.push(g);
    for (const g of this.groupsByNs.get(info.namespace!) ?? [])
      if (subjectSelects(g.subject, info)) out.push(g);
    return out;
  }

  /** The rules whose subject selects an identity, per direction, in tier order. */
  private tierInput(info: IdentityInfo, d: Direction, groups: Group[]) {
    const admin: Rule[] = [];
    const np: Rule[] = [];
    const baseline: Rule[] = [];
    for (const g of groups) {
      for (const r of g.rules) {
        if (r.direction !== d) continue;
        (r.tier === 'admin' ? admin : r.tier === 'np' ? np : baseline).push(r);
      }
    }
    return {
      admin: admin.sort(compareRules),
      isolation: (this.isolationByNs.get(info.namespace!) ?? []).filter(
        (i) => i.directions.includes(d) && matchesSelector(i.subject, info.labels!),
      ),
      np,
      baseline: baseline.sort(compareRules),
    };
  }

  /** tableId per tiers object, direction, layer and own named ports (tiers objects are shared). */
  private tableIds = new WeakMap<TieredRules, Map<string, string>>();

  /** Same rules in a layer (and, for ingress named ports, same own ports) = same table. */
  private tableId(info: IdentityInfo, d: Direction, t: TieredRules, layer: Layer): string {
    const rules = layer === 'admin' ? t.admin : t.isolation.length > 0 ? t.np : t.baseline;
    const named = d === 'ingress' && rules.some((r) => r.ports?.some((p) => p.kind === 'named'));
    let byKey = this.tableIds.get(t);
    if (!byKey) this.tableIds.set(t, (byKey = new Map()));
    const k = `${d}|${layer}|${named ? JSON.stringify(info.ports) : ''}`;
    let id = byKey.get(k);
    if (id === undefined) byKey.set(k, (id = this.computeTableId(info, d, t, layer)));
    return id;
  }

  private computeTableId(info: IdentityInfo, d: Direction, t: TieredRules, layer: Layer): string {
    // A networks peer lowered as "all pods" is part of the table's identity: if that flips, re-lower.
    const allPods = (r: Rule) =>
      r.peers
        .map((p, i) =>
          p.kind === 'cidr' && p.pods && (this.selection(r, i) as { allPods?: boolean }).allPods ? '*' : '',
        )
        .join('');
    const rev = (r: Rule) => `${this.rev(r)}${allPods(r)}`;
    const rules = layer === 'admin' ? t.admin : t.isolation.length > 0 ? t.np : t.baseline;
    const named = d === 'ingress' && rules.some((r) => r.ports?.some((p) => p.kind === 'named'));
    const sig = JSON.stringify([
      d,
      layer,
      layer === 'admin' ? [] : t.isolation.map((i) => i.policy),
      rules.map(rev),
      named ? info.ports : null,
    ]);
    return createHash('sha1').update(sig).digest('hex').slice(0, 16);
  }

  private keyCache = new WeakMap<Rule, MapStateKey[]>();
  /** Rule -> ids of the tables (layers) holding it: where a newly selected identity needs entries. */
  private readonly ruleTables = new Map<Rule, Set<string>>();

  private layerRules(t: Table): Rule[] {
    return t.layer === 'admin' ? t.tiers.admin : t.tiers.isolation.length > 0 ? t.tiers.np : t.tiers.baseline;
  }

  private indexTable(t: Table, add: boolean): void {
    for (const r of this.layerRules(t)) {
      let s = this.ruleTables.get(r);
      if (add) {
        if (!s) this.ruleTables.set(r, (s = new Set()));
        s.add(t.id);
      } else if (s) {
        s.delete(t.id);
        if (s.size === 0) this.ruleTables.delete(r);
      }
    }
  }

  private lowerCtx(info: IdentityInfo, d: Direction) {
    return {
      direction: d,
      local: info,
      identities: this.identities,
      byPortName: this.byPortName,
      select: (r: Rule, i: number) => this.selection(r, i),
      keyCache: this.keyCache,
    };
  }

  private rebuildPortIndex(): void {
    const m = new Map<string, number[]>();
    for (const info of this.identities.values()) {
      if (info.kind !== 'pod') continue;
      for (const n of new Set((info.ports ?? []).map((p) => p.name!))) {
        let l = m.get(n);
        if (!l) m.set(n, (l = []));
        l.push(info.id);
      }
    }
    this.byPortName = m;
  }

  /** Applies every pending change; returns what changed in the datapath's terms. */
  flush(): FlushDiff {
    this.ipcacheMemo.clear();
    const diff: FlushDiff = {
      created: 0,
      deleted: 0,
      updated: 0,
      entriesAdded: 0,
      entriesRemoved: 0,
      switched: 0,
      identitiesAdded: [],
      identitiesRemoved: [],
      recomputedTables: 0,
    };
    const before = new Map([...this.tables].map(([id, t]) => [id, t.state.size]));
    const full = this.everything;
    const rulesChanged = full || this.changedPolicies.size > 0;
    const netsBefore = this.networks.map(prefixKey).sort().join();
    if (rulesChanged) {
      this.rebuildRules();
      this.rebuildGroups();
    }
    // A new set of ANP network prefixes can move pods between identities (their network part).
    const netsChanged = this.networks.map(prefixKey).sort().join() !== netsBefore;
    if (this.rules.admin.length > MAX_ADMIN_RANK)
      throw new RangeError(`${this.rules.admin.length} admin rules exceed ${MAX_ADMIN_RANK}`);

    // 1. Identities: pods whose labels, namespace labels, ports or network membership changed.
    const podsToCheck = full || netsChanged ? new Set(this.pods.keys()) : new Set(this.dirtyPods);
    for (const k of this.dirtyPods) podsToCheck.add(k);
    const added: number[] = [];
    const removed: number[] = [];
    for (const k of podsToCheck) {
      const p = this.pods.get(k);
      const old = this.podIdentity.get(k);
      const info = p ? this.podIdentityInfo(p) : undefined;
      if (old !== undefined && old === info?.id) continue;
      if (old !== undefined) {
        this.podIdentity.delete(k);
        this.dropMember(old, k, removed);
      }
      if (info) {
        this.podIdentity.set(k, info.id);
        this.addMember(info, k, added);
      }
    }
    for (const name of this.dirtyNodes) {
      const n = this.nodes.get(name);
      const old = this.nodeIdentity.get(name);
      const key = n ? nodeIdentityKey(n.labels) : undefined;
      const id = key ? this.allocator.allocate('node', key) : undefined;
      if (old === id) continue;
      if (old !== undefined) this.dropMember(old, `node:${name}`, removed);
      if (n && id !== undefined) {
        this.nodeIdentity.set(name, id);
        this.addMember({ id, kind: 'node', key: key!, labels: n.labels }, `node:${name}`, added);
      } else this.nodeIdentity.delete(name);
    }
    if (
      full ||
      [...this.changedPolicies].some(([k, prev]) => hasCidr(prev) || hasCidr(this.policies.get(k)?.built))
    )
      this.syncCidrIdentities(added, removed);
    const addedSet = new Set(added.filter((id) => !removed.includes(id)));
    const removedSet = new Set(removed.filter((id) => !added.includes(id)));
    diff.identitiesAdded = [...addedSet];
    diff.identitiesRemoved = [...removedSet];
    // The identity and port indexes depend on identities only, not on rules: patched in place.
    if (full) {
      this.rebuildPortIndex();
      this.index = new IdentityIndex(this.identities.values());
    } else if (added.length || removed.length) {
      for (const id of removedSet) this.index.remove(id);
      for (const id of new Set(added)) {
        const info = this.identities.get(id);
        if (info) this.index.add(info);
      }
      if ([...addedSet, ...removedSet].some(isPodIdentity)) this.rebuildPortIndex();
    }

    // 2. Selections: recompute all when rules changed; else patch the cached ones.
    let allPodsBroken = false;
    /** Rules that select an identity that appeared: only their tables need a new bucket. */
    const selecting = new Set<Rule>();
    // Keys derive from selections: any identity or rule change invalidates them.
    if (full || addedSet.size || removedSet.size) this.keyCache = new WeakMap();
    if (full) {
      this.forgetAllSelections();
      this.tableIds = new WeakMap();
    } else {
      // Rules of changed policies are new objects with new selections.
      for (const key of this.changedPolicies.keys()) {
        for (const k of this.selectionsByPolicy.get(key) ?? []) this.forgetSelection(k);
        this.selectionsByPolicy.delete(key);
      }
      const podRemoved = [...removedSet].some(isPodIdentity);
      // Without identity changes the cached selections of unchanged rules still hold.
      if (removedSet.size)
        for (const { s } of this.selectionRules.values())
          if (s.kind === 'set') {
            for (const id of removedSet) s.ids.delete(id);
            s.dense = undefined;
          }
      const addedInfos = [...addedSet].map((id) => this.identities.get(id)!);
      // New pods can only be selected by peers of their namespace or peers not bound to one.
      const candidates: Iterable<SelectionEntry>[] = [];
      if (addedInfos.length && addedInfos.every((i) => i.kind === 'pod')) {
        for (const ns of new Set(addedInfos.map((i) => i.namespace!)))
          candidates.push(this.selectionsByNs.get(ns) ?? []);
        candidates.push(this.selectionsUnbound);
      } else if (addedInfos.length || podRemoved) candidates.push(this.selectionRules.values());
      for (const list of candidates) {
        for (const { rule, index, s } of list) {
          if (s.kind !== 'set') continue;
          const peer = rule.peers[index]!;
          if (peer.kind === 'cidr' && peer.pods) {
            // Whether a networks peer covers every pod can flip either way: an added pod outside it
            // breaks "all"; only a removed pod can make an uncovered peer cover all (then count).
            let all = Boolean(s.allPods);
            if (all) {
              for (const info of addedInfos)
                if (info.kind === 'pod' && !IdentityIndex.podInside(info, peer)) all = false;
            } else if (podRemoved) all = this.index.coversAllPods(peer);
            if (all !== Boolean(s.allPods)) {
              allPodsBroken = true;
              continue;
            }
            for (const info of addedInfos) {
              const selects =
                info.kind === 'pod'
                  ? !all && IdentityIndex.podInside(info, peer)
                  : info.id !== ID.HOST && peerSelects(peer, info);
              if (selects) {
                s.ids.add(info.id);
                s.dense = undefined;
                selecting.add(rule);
              }
            }
            continue;
          }
          for (const info of addedInfos) {
            if (info.id !== ID.HOST && peerSelects(peer, info)) {
              s.ids.add(info.id);
              s.dense = undefined;
              selecting.add(rule);
            }
          }
        }
      }
    }

    if (allPodsBroken) {
      // Rare (e.g. an IPv6-only pod beside an IPv4 0.0.0.0/0 rule): lower everything again.
      this.forgetAllSelections();
      this.tableIds = new WeakMap();
      this.tables.clear();
      this.endpointTables.clear();
    }

    // 3. Tables: subject identities (re)assigned; new layers lowered; unused ones freed.
    const subjectIds =
      full || allPodsBroken ? [...this.identities.keys()] : [...addedSet, ...this.affectedSubjects()];
    const subjects = [...new Set(subjectIds)]
      .map((id) => this.identities.get(id)!)
      .filter((i) => i?.kind === 'pod');
    for (const id of removedSet) this.detachSubject(id);
    for (const info of subjects) {
      const ids = {} as Record<Direction, Record<Layer, string>>;
      const groups = this.groupsOf(info);
      for (const d of DIRECTIONS) {
        const tiers = this.tiers(info, d, groups);
        ids[d] = { admin: '', lower: '' };
        for (const layer of LAYERS) {
          const tid = this.tableId(info, d, tiers, layer);
          ids[d][layer] = tid;
          if (!this.tables.has(tid)) {
            const state = lowerLayer(layer, tiers, this.lowerCtx(info, d));
            const t: Table = { id: tid, direction: d, layer, tiers, state, subjects: new Set() };
            this.tables.set(tid, t);
            this.indexTable(t, true);
            diff.recomputedTables++;
          }
        }
      }
      const prev = this.endpointTables.get(info.id);
      if (prev && sameLayers(prev, ids)) continue;
      if (prev) this.detachSubject(info.id);
      for (const d of DIRECTIONS)
        for (const layer of LAYERS) this.tables.get(ids[d][layer])!.subjects.add(info.id);
      this.endpointTables.set(info.id, ids);
      if (prev) diff.switched += this.members.get(info.id)?.size ?? 0;
    }
    for (const [id, t] of [...this.tables]) {
      if (t.subjects.size > 0) continue;
      this.tables.delete(id);
      this.indexTable(t, false);
    }

    // 4. Identities that appeared or vanished as remotes: patch their buckets in the existing layers
    // (safe in place: no packet carries a new identity before the ipcache maps an address to it).
    if (addedSet.size || removedSet.size) {
      // Egress rules with named ports expand wildcard peers per destination identity: include them.
      for (const r of this.egressNamedRules) selecting.add(r);
      const toPatch = new Set<string>();
      for (const r of selecting) for (const id of this.ruleTables.get(r) ?? []) toPatch.add(id);
      for (const t of this.tables.values()) {
        if (!before.has(t.id)) continue; // lowered just now, already complete
        let touched = false;
        for (const id of removedSet) {
          if (t.state.bucket(id).length) {
            t.state.clear(id);
            touched = true;
          }
        }
        if (toPatch.has(t.id)) {
          const local = this.identities.get([...t.subjects][0]!)!;
          for (const id of addedSet) {
            const n = t.state.bucket(id).length;
            lowerLayer(t.layer, t.tiers, this.lowerCtx(local, t.direction), t.state, id);
            if (n || t.state.bucket(id).length) touched = true;
          }
        }
        if (touched) diff.updated++;
      }
    }

    for (const [id, t] of this.tables) {
      const was = before.get(id);
      if (was === undefined) {
        diff.created++;
        diff.entriesAdded += t.state.size;
      }
    }
    for (const [id, n] of before) {
      if (!this.tables.has(id)) {
        diff.deleted++;
        diff.entriesRemoved += n;
      }
    }
    this.dirtyPods.clear();
    this.dirtyNodes.clear();
    this.changedPolicies.clear();
    this.everything = false;
    return diff;
  }

  private detachSubject(id: number): void {
    const prev = this.endpointTables.get(id);
    if (!prev) return;
    for (const d of DIRECTIONS)
      for (const layer of LAYERS) this.tables.get(prev[d][layer])?.subjects.delete(id);
    this.endpointTables.delete(id);
  }

  // ---- reads ------------------------------------------------------------------------------------

  /** ipcache per node, built once per state: identityOf runs per probe, the CLI's truth table per pod pair. */
  private readonly ipcacheMemo = new Map<string, IpcacheEntry[]>();

  /** The ipcache as a node agent on `node` sees it: own addresses map to HOST. */
  ipcache(node?: string): IpcacheEntry[] {
    const memo = this.ipcacheMemo.get(node ?? '');
    if (memo) return memo;
    const out: IpcacheEntry[] = [
      { prefix: WORLD4, identity: ID.WORLD },
      { prefix: WORLD6, identity: ID.WORLD6 },
    ];
    for (const info of this.identities.values())
      if (info.kind === 'cidr') out.push({ prefix: info.prefix!, identity: info.id });
    for (const [name, n] of this.nodes) {
      const id = name === node ? ID.HOST : this.nodeIdentity.get(name);
      for (const ip of n.ips) {
        const h = hostPrefix(ip);
        if (h && id !== undefined) out.push({ prefix: h, identity: id });
      }
    }
    for (const [k, p] of this.pods) {
      const id = this.podIdentity.get(k);
      for (const ip of p.ips) {
        const h = hostPrefix(ip);
        if (h && id !== undefined) out.push({ prefix: h, identity: id });
      }
    }
    this.ipcacheMemo.set(node ?? '', out);
    return out;
  }

  /** Identity of an address: the most specific ipcache prefix holding it. */
  identityOf(ip: string, node?: string): number {
    const h = hostPrefix(ip);
    if (!h) return ID.WORLD;
    let best: IpcacheEntry | undefined;
    for (const e of this.ipcache(node))
      if (contains(e.prefix, h) && (!best || e.prefix.len > best.prefix.len)) best = e;
    return best?.identity ?? (h.family === 6 ? ID.WORLD6 : ID.WORLD);
  }

  /** Loads a whole cluster (plain data) and flushes. */
  static fromCluster(c: import('./model.ts').Cluster): NetpolEngine {
    const e = new NetpolEngine();
    for (const ns of c.namespaces) e.upsertNamespace(ns);
    for (const n of c.nodes) e.upsertNode(n);
    for (const p of c.pods) e.upsertPod(p);
    for (const p of c.policies) e.upsertPolicy(p);
    e.flush();
    return e;
  }

  /** The two layers judging one pod in one direction. */
  tableOf(podNs: string, podName: string, d: Direction): Record<Layer, Table> | undefined {
    const id = this.podIdentity.get(`${podNs}/${podName}`);
    const t = id === undefined ? undefined : this.endpointTables.get(id);
    if (!t) return undefined;
    const admin = this.tables.get(t[d].admin);
    const lower = this.tables.get(t[d].lower);
    return admin && lower ? { admin, lower } : undefined;
  }

  /** Every policy's problems (errors make it ignored; warnings do not). */
  problems(): { policy: string; errors: string[]; warnings: string[] }[] {
    const known = new Set<string>();
    for (const p of this.pods.values()) for (const cp of p.ports) if (cp.name) known.add(cp.name);
    const out: { policy: string; errors: string[]; warnings: string[] }[] = [];
    for (const p of this.policies.values()) {
      const warnings = [...p.built.warnings];
      for (const r of p.built.rules) {
        for (const m of r.ports ?? []) {
          if (m.kind === 'named' && !known.has(m.name))
            warnings.push(
              `${r.direction}[${r.source.index}]: named port "${m.name}" matches no container port`,
            );
        }
      }
      if (p.built.errors.length || warnings.length)
        out.push({ policy: p.built.key, errors: p.built.errors, warnings });
    }
    return out;
  }
}

type SelectionEntry = { rule: Rule; index: number; s: Selection };

type Group = { id: number; subject: Rule['subject']; namespace?: string; rules: Rule[] };

const hasCidr = (b: BuiltPolicy | null | undefined) =>
  Boolean(b?.rules.some((r) => r.peers.some((p) => p.kind === 'cidr')));

function policyKeyOf(r: Rule): string {
  return r.id.slice(0, r.id.indexOf('#'));
}

export function entrySignature(e: MapStateEntry): string {
  return `${keyString(e)}=${e.precedence}`;
}

export { parseCidr };
