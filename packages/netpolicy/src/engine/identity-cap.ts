// The per-namespace identity cap. A NetworkPolicy peer such as `namespaceSelector: {}` + `app=web`
// costs one policy-map entry per selected identity (times ports and rule sets), and identities are
// made by whoever labels pods: 3,200 pods of one tenant, each with one distinct extra label, grew
// another namespace's entries from 0 to 102,400 and got its policy refused. So each namespace's
// label sets are ranked by age (the oldest pod holding one, then the key) and only the first `cap`
// are selected one by one by *other* namespaces' NetworkPolicies. The later ones are "capped": their
// identity carries the mark, other namespaces' NetworkPolicy peers leave them out (those only allow,
// so leaving out fails closed, for the namespace that made too many label sets and nobody else), and
// peers that admit every pod with one wildcard entry (`namespaceSelector: {}` alone, an ipBlock holding
// every pod) still admit them. Their own namespace's policies and every admin rule see them as usual:
// an admin Deny never loses a pod. Age ranking means a newcomer cannot push an older label set out.
// The cap is per tenant (tenants.ts: the namespaces sharing an admin-set label, or one namespace):
// one owner's many namespaces share one cap, so seven namespaces at the cap no longer cost another
// tenant's `namespaceSelector: {}` peer seven times 512 identities (round three).
export const DEFAULT_FOREIGN_IDENTITY_CAP = 512;

interface LabelSet {
  /** Member pod key -> its creationTimestamp ('' when unknown). */
  members: Map<string, string>;
  oldest: string;
  /** the namespace of its pods (a label set's key holds its namespace) */
  namespace: string;
}

export interface CappedNamespace {
  namespace: string;
  /** its own label sets */
  labelSets: number;
  /** of them, past the cap */
  capped: number;
  /** the tenant whose namespaces share the cap, when it is not the namespace alone */
  tenant?: string;
}

export class IdentityCap {
  readonly cap: number;
  /** group (a tenant) -> base identity key -> its pods. */
  private readonly sets = new Map<string, Map<string, LabelSet>>();
  /** group -> the capped base keys. */
  private readonly capped = new Map<string, Set<string>>();
  /** pod key -> where it is placed (`ns`: its group). */
  private readonly placed = new Map<string, { ns: string; base: string }>();
  private readonly dirty = new Set<string>();

  constructor(cap = DEFAULT_FOREIGN_IDENTITY_CAP) {
    if (!(cap >= 1)) throw new RangeError(`identity cap ${cap} must be at least 1`);
    this.cap = cap;
  }

  /**
   * Records a pod's label set in its group, the tenant of its namespace (`base` undefined: the pod is
   * gone).
   */
  place(
    pod: string,
    ns: string | undefined,
    base: string | undefined,
    created = '',
    namespace = ns ?? '',
  ): void {
    const was = this.placed.get(pod);
    if (was && was.ns === ns && was.base === base) return;
    if (was) {
      const byKey = this.sets.get(was.ns)!;
      const set = byKey.get(was.base)!;
      const c = set.members.get(pod)!;
      set.members.delete(pod);
      if (set.members.size === 0) byKey.delete(was.base);
      else if (c === set.oldest) set.oldest = minOf(set.members.values());
      if (byKey.size === 0) this.sets.delete(was.ns);
      this.placed.delete(pod);
      this.dirty.add(was.ns);
    }
    if (ns === undefined || base === undefined) return;
    let byKey = this.sets.get(ns);
    if (!byKey) this.sets.set(ns, (byKey = new Map()));
    let set = byKey.get(base);
    if (!set) byKey.set(base, (set = { members: new Map(), oldest: created, namespace }));
    set.members.set(pod, created);
    if (created < set.oldest) set.oldest = created;
    this.placed.set(pod, { ns, base });
    this.dirty.add(ns);
  }

  /**
   * Ranks the namespaces whose label sets changed; returns the pods whose label set went in or out
   * of the cap (their identity changes). Costs nothing for a namespace under the cap.
   */
  rerank(): string[] {
    const moved: string[] = [];
    for (const ns of this.dirty) {
      const byKey = this.sets.get(ns);
      const before = this.capped.get(ns) ?? new Set<string>();
      const now = new Set<string>();
      if (byKey && byKey.size > this.cap) {
        const ranked = [...byKey].sort(([ka, a], [kb, b]) =>
          a.oldest < b.oldest ? -1 : a.oldest > b.oldest ? 1 : ka < kb ? -1 : 1,
        );
        for (let i = this.cap; i < ranked.length; i++) now.add(ranked[i]![0]);
      }
      for (const k of before) if (!now.has(k)) moved.push(...(byKey?.get(k)?.members.keys() ?? []));
      for (const k of now) if (!before.has(k)) moved.push(...byKey!.get(k)!.members.keys());
      if (now.size) this.capped.set(ns, now);
      else this.capped.delete(ns);
    }
    this.dirty.clear();
    return moved;
  }

  isCapped(ns: string, base: string): boolean {
    return this.capped.get(ns)?.has(base) ?? false;
  }

  /**
   * Namespaces with capped label sets, with their own label-set counts (what Events and metrics
   * report: a namespace's Event names its own label sets only, never another namespace's).
   */
  over(): CappedNamespace[] {
    const byNs = new Map<string, CappedNamespace>();
    for (const [group, keys] of this.capped) {
      for (const set of this.sets.get(group)?.values() ?? []) {
        const c = byNs.get(set.namespace) ?? {
          namespace: set.namespace,
          labelSets: 0,
          capped: 0,
          ...(group !== set.namespace ? { tenant: group } : {}),
        };
        c.labelSets++;
        byNs.set(set.namespace, c);
      }
      for (const k of keys) {
        const ns = this.sets.get(group)?.get(k)?.namespace;
        if (ns !== undefined) byNs.get(ns)!.capped++;
      }
    }
    return [...byNs.values()]
      .filter((c) => c.capped > 0)
      .sort((a, b) => (a.namespace < b.namespace ? -1 : 1));
  }
}

function minOf(values: Iterable<string>): string {
  let m: string | undefined;
  for (const v of values) if (m === undefined || v < m) m = v;
  return m ?? '';
}
