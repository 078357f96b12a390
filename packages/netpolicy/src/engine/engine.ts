import { AddressReads } from './address-reads.ts';
import type { IpcacheEntry } from './addresses.ts';
import { parseCidr } from './cidr.ts';
import { type IdentityInfo, isPodIdentity } from './identities.ts';
import { IdentityBook } from './identity-book.ts';
import { type CappedNamespace, IdentityCap } from './identity-cap.ts';
import type { Layer, LowerContext } from './lower.ts';
import { keyString, type MapStateEntry, type MapStateKey } from './mapstate.ts';
import type { Namespace, NetPolicyObject, Node, Pod } from './model.ts';
import { MAX_ADMIN_RANK } from './precedence.ts';
import { RuleGroups, subjectTests } from './rule-groups.ts';
import {
  type BuiltPolicy,
  buildPolicy,
  type Direction,
  type Isolation,
  type Peer,
  type Rule,
} from './rules.ts';
import { IdentityIndex } from './selection.ts';
import { SelectionCache } from './selection-cache.ts';
import type { StagedPolicy } from './staged.ts';
import { buildStaged, StagedView, splitTiers, stagedKey, stagedTargetKey } from './staged-view.ts';
import { TableIds } from './table-ids.ts';
import { type LayerIds, sameLayers, type Table, TableStore } from './table-store.ts';
import { DEFAULT_TENANT_LABEL, type TenantId, tenantOf } from './tenants.ts';

export type { IpcacheEntry } from './addresses.ts';
export { DIRECTIONS, LAYERS, type Table } from './table-store.ts';

/** Which rules judge: those enforced, or the staged set's (staged-view.ts), which never enforce. */
export type View = 'enforced' | 'staged';

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

export interface EngineOptions {
  /** Label sets per tenant that other tenants' NetworkPolicies select one by one (identity-cap.ts). */
  foreignIdentityCap?: number;
  /** The namespace label whose value names a namespace's tenant (tenants.ts); '' for none. */
  tenantLabel?: string;
}

const podKey = (p: { namespace: string; name: string }) => `${p.namespace}/${p.name}`;

export class NetpolEngine {
  readonly namespaces = new Map<string, Namespace>();
  readonly pods = new Map<string, Pod>();
  readonly nodes = new Map<string, Node>();
  readonly policies = new Map<string, { obj: NetPolicyObject; built: BuiltPolicy; revision: number }>();

  private readonly book = new IdentityBook((ns) => this.nsLabels(ns));
  readonly identities = this.book.identities;
  readonly podIdentity = this.book.podIdentity;
  readonly nodeIdentity = this.book.nodeIdentity;

  rules: { admin: Rule[]; np: Rule[]; isolation: Isolation[]; baseline: Rule[] } = {
    admin: [],
    np: [],
    isolation: [],
    baseline: [],
  };
  /** Subject identity -> table id per direction. */
  readonly endpointTables = new Map<number, LayerIds>();
  private byPortName = new Map<string, number[]>();
  private index = new IdentityIndex([]);
  private readonly selections = new SelectionCache(() => this.index);
  private readonly groups = new RuleGroups((key) => this.revisionOf(key));
  /** The staged set's view over the same identities (staged-view.ts); off while nothing is staged. */
  private readonly staged = new StagedView((key) => this.revisionOf(key));
  private readonly store = new TableStore(
    new TableIds(
      (r) => this.groups.rev(r),
      (r, i) => this.selections.get(r, i),
    ),
    (info, d) => this.lowerCtx(info, d),
  );
  /** The tables of both views by id (table-store.ts). */
  readonly tables = this.store.tables;
  private revision = 0;
  private podsRevision = 0;

  /** The revision of a policy's (or a staged object's) current build; 0 when gone. */
  private revisionOf(key: string): number {
    return this.policies.get(key)?.revision ?? this.staged.entries.get(key)?.revision ?? 0;
  }

  readonly tenantLabel: string;

  constructor(opts: EngineOptions = {}) {
    if (opts.foreignIdentityCap !== undefined) this.book.cap = new IdentityCap(opts.foreignIdentityCap);
    this.tenantLabel = opts.tenantLabel ?? DEFAULT_TENANT_LABEL;
    this.book.tenantOf = (ns) => this.tenantOf(ns);
  }

  /** The tenant a namespace belongs to (tenants.ts). */
  tenantOf(ns: string): TenantId {
    return tenantOf(ns, this.namespaces.get(ns)?.labels, this.tenantLabel);
  }

  /** Namespaces with more label sets than the identity cap (identity-cap.ts). */
  cappedNamespaces(): CappedNamespace[] {
    return this.book.cap.over();
  }

  get foreignIdentityCap(): number {
    return this.book.cap.cap;
  }

  private dirtyPods = new Set<string>();
  private dirtyNodes = new Set<string>();
  /** Policies changed since the last flush, with what they were before (null: new). */
  private changedPolicies = new Map<string, BuiltPolicy | null>();
  private everything = true;

  // ---- inputs -----------------------------------------------------------------------------------

  /** Bumped by every policy change: what the published rules depend on changed. */
  get policyRevision(): number {
    return this.revision;
  }

  /** Bumped by every namespace, pod and node change: what exact analyses of the cluster read. */
  get populationRevision(): number {
    return this.podsRevision;
  }

  /** Bumped when a namespace's tenant changes (tenants.ts): what per-tenant charges read. */
  tenancyRevision = 0;

  upsertNamespace(ns: Namespace): void {
    this.podsRevision++;
    this.clearAddressMemos();
    if (tenantOf(ns.name, ns.labels, this.tenantLabel) !== this.tenantOf(ns.name)) this.tenancyRevision++;
    this.namespaces.set(ns.name, ns);
    for (const [k, p] of this.pods) if (p.namespace === ns.name) this.dirtyPods.add(k);
  }

  upsertPod(p: Pod): void {
    this.podsRevision++;
    this.clearAddressMemos();
    this.pods.set(podKey(p), p);
    this.dirtyPods.add(podKey(p));
  }

  removePod(namespace: string, name: string): void {
    this.clearAddressMemos();
    const k = `${namespace}/${name}`;
    if (!this.pods.delete(k)) return;
    this.podsRevision++;
    this.dirtyPods.add(k);
  }

  upsertNode(n: Node): void {
    this.podsRevision++;
    this.clearAddressMemos();
    this.nodes.set(n.name, n);
    this.dirtyNodes.add(n.name);
  }

  /** A deleted node: its addresses leave the ipcache (they may be reused by anyone). */
  removeNode(name: string): void {
    if (!this.nodes.delete(name)) return;
    this.podsRevision++;
    this.clearAddressMemos();
    this.dirtyNodes.add(name);
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
    this.revision++;
    if (!this.changedPolicies.has(key)) this.changedPolicies.set(key, prev.built);
  }

  /**
   * A staged object (staged.ts): judged beside the enforced set, never enforcing. Returns its key
   * (`StagedNetworkPolicy/shop/x`), which its rules' ids and removeStaged use.
   */
  upsertStaged(s: StagedPolicy): string {
    const key = stagedKey(s);
    const prev = this.staged.entries.get(key);
    if (
      prev &&
      prev.staged.action === s.action &&
      JSON.stringify(prev.staged.policy.spec) === JSON.stringify(s.policy.spec)
    )
      return key;
    // one its kind's validation refuses is judged as the engine enforces such a policy (a NetworkPolicy
    // fails closed: its isolation kept, no rule allowing), as `netpol simulate --staged` judges it;
    // its status says Invalid (controller/staged-status.ts)
    this.staged.entries.set(key, { staged: s, built: buildStaged(s), revision: ++this.revision });
    if (!this.changedPolicies.has(key)) this.changedPolicies.set(key, prev?.built ?? null);
    return key;
  }

  removeStaged(key: string): void {
    const prev = this.staged.entries.get(key);
    if (!prev) return;
    this.staged.entries.delete(key);
    this.revision++;
    if (!this.changedPolicies.has(key)) this.changedPolicies.set(key, prev.built);
  }

  /**
   * The staged objects that change how a pod (`ns/name`) is judged: those whose staged policy, or
   * whose target (the policy they replace or remove), selects it. Where the staged set judges one of
   * its flows otherwise, these are the objects answerable for it.
   */
  stagedOf(pod: string): string[] {
    const id = this.podIdentity.get(pod);
    const info = id === undefined ? undefined : this.identities.get(id);
    if (!info || !this.staged.endpointTables.has(info.id)) return [];
    const out: string[] = [];
    for (const [key, e] of this.staged.entries) {
      const target = this.policies.get(stagedTargetKey(key)!)?.built;
      if ([...subjectTests(e.built), ...subjectTests(target)].some((t) => t(info))) out.push(key);
    }
    return out;
  }

  /** The ids of an endpoint's staged tables, where they differ from its enforced ones. */
  get stagedEndpointTables(): ReadonlyMap<number, LayerIds> {
    return this.staged.endpointTables;
  }

  /** Pod identities whose applicable rules a policy change can alter: its old and new subjects. */
  private affectedSubjects(): Set<number> {
    const out = new Set<number>();
    for (const [key, prev] of this.changedPolicies) {
      const now = this.policies.get(key)?.built ?? this.staged.entries.get(key)?.built;
      // a staged object also moves the subjects of the policy it replaces or removes (staged view)
      const target = stagedTargetKey(key);
      const tests = [
        ...subjectTests(prev),
        ...subjectTests(now),
        ...subjectTests(target === undefined ? undefined : this.policies.get(target)?.built),
      ];
      if (tests.length === 0) continue;
      for (const info of this.identities.values())
        if (info.kind === 'pod' && tests.some((t) => t(info))) out.add(info.id);
    }
    return out;
  }

  nsLabels = (ns: string): Record<string, string> =>
    this.namespaces.get(ns)?.labels ?? { 'kubernetes.io/metadata.name': ns };

  // ---- derived ----------------------------------------------------------------------------------

  /** Rebuilds the tiers' rule lists; returns whether the pod-matching network prefixes changed. */
  private rebuildRules(): boolean {
    const all = [...this.policies.values()].map((p) => p.built);
    this.rules = splitTiers(all);
    // identities, named-port expansion and CIDRs follow both views' rules (staged-view.ts)
    const stagedOnly = this.staged.rebuild(all).flatMap((b) => b.rules);
    this.allRules = [...this.rules.admin, ...this.rules.np, ...this.rules.baseline, ...stagedOnly];
    this.egressNamedRules = this.allRules.filter(
      (r) => r.direction === 'egress' && r.ports?.some((p) => p.kind === 'named'),
    );
    return this.book.setNetworks(this.allRules);
  }

  /** Every rule of both views (the enforced rules, then those only staging adds). */
  private allRules: Rule[] = [];

  /** Egress rules with named ports: they expand wildcard peers per destination identity. */
  private egressNamedRules: Rule[] = [];

  private keyCache = new WeakMap<Rule, MapStateKey[]>();
  /** What lowering a layer for `info` in direction `d` reads (the engine's own; benches lower with it). */
  lowerCtx(info: IdentityInfo, d: Direction): LowerContext {
    return {
      direction: d,
      local: info,
      identities: this.identities,
      byPortName: this.byPortName,
      select: (r: Rule, i: number) => this.selections.get(r, i),
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
    this.clearAddressMemos();
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
    // A new set of network prefixes can move pods between identities (their network part).
    let netsChanged = false;
    if (rulesChanged) {
      netsChanged = this.rebuildRules();
      this.groups.rebuild(this.rules);
    }
    if (this.rules.admin.length > MAX_ADMIN_RANK)
      throw new RangeError(`${this.rules.admin.length} admin rules exceed ${MAX_ADMIN_RANK}`);

    // 1. Identities: pods whose labels, namespace labels, ports or network membership changed.
    const podsToCheck = full || netsChanged ? new Set(this.pods.keys()) : new Set(this.dirtyPods);
    for (const k of this.dirtyPods) podsToCheck.add(k);
    const added: number[] = [];
    const removed: number[] = [];
    // Pods are placed in their namespace's label-set ranking first: a label set going past the cap
    // (or back under it) changes the identity of every pod holding it.
    for (const k of podsToCheck) this.book.placePod(k, this.pods.get(k));
    for (const k of this.book.rerank()) podsToCheck.add(k);
    for (const k of podsToCheck) this.book.syncPod(k, this.pods.get(k), added, removed);
    this.book.endPass();
    for (const name of this.dirtyNodes) this.book.syncNode(name, this.nodes.get(name), added, removed);
    if (
      full ||
      [...this.changedPolicies].some(
        ([k, prev]) =>
          hasCidr(prev) || hasCidr(this.policies.get(k)?.built ?? this.staged.entries.get(k)?.built),
      )
    )
      this.book.syncCidrs(this.allRules, added, removed);
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
    let selecting = new Set<Rule>();
    // Keys derive from selections: any identity or rule change invalidates them.
    if (full || addedSet.size || removedSet.size) this.keyCache = new WeakMap();
    if (full) {
      this.selections.clear();
      this.store.resetIds();
    } else {
      for (const key of this.changedPolicies.keys()) this.selections.forgetPolicy(key);
      ({ selecting, allPodsBroken } = this.selections.patch(
        [...addedSet].map((id) => this.identities.get(id)!),
        removedSet,
      ));
    }

    if (allPodsBroken) {
      // Rare (e.g. an IPv6-only pod beside an IPv4 0.0.0.0/0 rule): lower everything again.
      this.selections.clear();
      this.store.resetIds();
      this.store.clear();
      this.endpointTables.clear();
      this.staged.endpointTables.clear();
    }

    // 3. Tables: subject identities (re)assigned; new layers lowered; unused ones freed.
    const subjectIds =
      full || allPodsBroken ? [...this.identities.keys()] : [...addedSet, ...this.affectedSubjects()];
    const subjects = [...new Set(subjectIds)]
      .map((id) => this.identities.get(id)!)
      .filter((i) => i?.kind === 'pod');
    for (const id of removedSet) this.detachSubject(id);
    for (const info of subjects) {
      const enforced = this.store.assign(this.groups, info);
      const ids = enforced.ids;
      diff.recomputedTables += enforced.lowered;
      let staged: LayerIds | undefined;
      if (this.staged.rules) {
        const s = this.store.assign(this.staged.groups, info);
        diff.recomputedTables += s.lowered;
        if (!sameLayers(s.ids, ids)) staged = s.ids;
      }
      const prev = this.endpointTables.get(info.id);
      const prevStaged = this.staged.endpointTables.get(info.id);
      const stagedSame = prevStaged && staged ? sameLayers(prevStaged, staged) : prevStaged === staged;
      if (prev && sameLayers(prev, ids) && stagedSame) continue;
      if (prev) this.detachSubject(info.id);
      this.store.attach(info.id, ids);
      if (staged) this.store.attach(info.id, staged);
      this.endpointTables.set(info.id, ids);
      if (staged) this.staged.endpointTables.set(info.id, staged);
      if (prev && !sameLayers(prev, ids)) diff.switched += this.book.memberCount(info.id);
    }
    this.store.dropUnused();

    // 4. Identities that appeared or vanished as remotes: patch their buckets in the existing layers.
    if (addedSet.size || removedSet.size) {
      // Egress rules with named ports expand wildcard peers per destination identity: include them.
      for (const r of this.egressNamedRules) selecting.add(r);
      diff.updated += this.store.patchRemotes(
        { added: addedSet, removed: removedSet, selecting, before },
        this.identities,
      );
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

  /** An identity leaves the tables of both views. */
  private detachSubject(id: number): void {
    for (const view of [this.endpointTables, this.staged.endpointTables]) {
      const prev = view.get(id);
      if (!prev) continue;
      this.store.detach(id, prev);
      view.delete(id);
    }
  }

  // ---- reads ------------------------------------------------------------------------------------

  /** Address reads (pod, node, identity of an address), memoised per state (address-reads.ts). */
  private readonly addressReads = new AddressReads(this);

  private clearAddressMemos(): void {
    this.addressReads.clear();
  }

  /** The pod that holds an address (the first in iteration order), in one map lookup. */
  podAt(ip: string): Pod | undefined {
    return this.addressReads.podAt(ip);
  }

  /** The node that holds an address (the first in iteration order). */
  nodeAt(ip: string): Node | undefined {
    return this.addressReads.nodeAt(ip);
  }

  /** The ipcache as a node agent on `node` sees it: own addresses map to HOST. */
  ipcache(node?: string): IpcacheEntry[] {
    return this.addressReads.ipcache(node);
  }

  /** Identity of an address: the most specific ipcache prefix holding it. */
  identityOf(ip: string, node?: string): number {
    return this.addressReads.identityOf(ip, node);
  }

  /** Loads a whole cluster (plain data) and flushes. */
  static fromCluster(c: import('./model.ts').Cluster, opts?: EngineOptions): NetpolEngine {
    const e = new NetpolEngine(opts);
    for (const ns of c.namespaces) e.upsertNamespace(ns);
    for (const n of c.nodes) e.upsertNode(n);
    for (const p of c.pods) e.upsertPod(p);
    for (const p of c.policies) e.upsertPolicy(p);
    e.flush();
    return e;
  }

  /** Whether a networks peer holds every pod identity (its selection is then one ALL_PODS key). */
  coversAllPods(peer: Extract<Peer, { kind: 'cidr' }>): boolean {
    return this.index.coversAllPods(peer);
  }

  /** The two layers judging one pod in one direction (`staged`: those the staged set would). */
  tableOf(
    podNs: string,
    podName: string,
    d: Direction,
    view: View = 'enforced',
  ): Record<Layer, Table> | undefined {
    const id = this.podIdentity.get(`${podNs}/${podName}`);
    const t =
      id === undefined
        ? undefined
        : ((view === 'staged' ? this.staged.endpointTables.get(id) : undefined) ??
          this.endpointTables.get(id));
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
      // a NetworkPolicy's named ports are checked against its own namespace's pods only (feedback.ts):
      // a cluster-wide check here would tell its author about other namespaces' pods
      for (const r of p.built.isolation ? [] : p.built.rules) {
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

const hasCidr = (b: BuiltPolicy | null | undefined) =>
  Boolean(b?.rules.some((r) => r.peers.some((p) => p.kind === 'cidr')));

export function entrySignature(e: MapStateEntry): string {
  return `${keyString(e)}=${e.precedence}`;
}

export { parseCidr };
