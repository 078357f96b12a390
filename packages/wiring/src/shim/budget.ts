// Which routes a gateway's wasm-shim configuration leaves out when it would not fit, decided fairly
// between namespaces (the unit of ownership on a shared gateway). Pure: wasm.ts applies the plan.
//
// - Each namespace is guaranteed an equal share of the bytes left for action sets; what a namespace
//   does not use is shared by the others (max-min fairness, "water-filling"). A namespace within its
//   share is never touched, however large the others grow.
// - A namespace over its share (in bytes, or over `maxSetsPerNamespace` sets) loses its largest
//   routes first, one at a time, until its kept sets and the deny sets that replace the refused ones
//   (one per hostname, size.ts) fit: a namespace pays for its own refusals.
// - The plan is computed once from the sets' sizes; wasm.ts checks the real size and, if the
//   configuration still does not fit, refuses the largest remaining routes in a few bounded rounds,
//   then publishes a configuration that denies everything.

export interface SizedRoute {
  /** `<Kind>/<ns>/<name>` */
  route: string;
  namespace: string;
  /** Bytes of the route's sets (serialized, with their separators). */
  bytes: number;
  sets: number;
  /** The hostnames its sets are under (a refused route is denied by one set per namespace and hostname). */
  hostnames: string[];
}

export interface BudgetLimits {
  /** Bytes the action sets of all namespaces may take. */
  bytes: number;
  /** Sets one namespace may have on one gateway. */
  setsPerNamespace: number;
  /** Bytes of the deny set a namespace's refused routes under one hostname share. */
  denyBytes: (hostname: string) => number;
}

/** The water level: the share every namespace over it gets, the others keeping all they use. */
export function fairShare(usage: readonly number[], budget: number): number {
  const sorted = [...usage].sort((a, b) => a - b);
  let left = budget;
  for (let i = 0; i < sorted.length; i++) {
    const share = left / (sorted.length - i);
    if (sorted[i]! > share) return share;
    left -= sorted[i]!;
  }
  return Number.POSITIVE_INFINITY;
}

/** The routes to refuse, each with why (empty: everything fits). */
export function planRefusals(routes: readonly SizedRoute[], limits: BudgetLimits): Map<string, string> {
  const byNs = new Map<string, SizedRoute[]>();
  for (const r of routes) {
    const list = byNs.get(r.namespace) ?? [];
    list.push(r);
    byNs.set(r.namespace, list);
  }
  const usage = (rs: readonly SizedRoute[]) => rs.reduce((n, r) => n + r.bytes, 0);
  const total = routes.reduce((n, r) => n + r.bytes, 0);
  const share =
    total <= limits.bytes ? Number.POSITIVE_INFINITY : fairShare([...byNs.values()].map(usage), limits.bytes);
  const out = new Map<string, string>();
  for (const [ns, rs] of [...byNs].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
    let bytes = usage(rs);
    let sets = rs.reduce((n, r) => n + r.sets, 0);
    if (bytes <= share && sets <= limits.setsPerNamespace) continue;
    const largestFirst = [...rs].sort((a, b) => b.bytes - a.bytes || (a.route < b.route ? -1 : 1));
    const denied = new Set<string>();
    for (const r of largestFirst) {
      if (bytes <= share && sets <= limits.setsPerNamespace) break;
      const why =
        sets > limits.setsPerNamespace
          ? `namespace ${ns} has ${sets.toLocaleString('en')} action sets on this gateway, over the ${limits.setsPerNamespace.toLocaleString('en')} a namespace may have`
          : `namespace ${ns}'s action sets take ${bytes.toLocaleString('en')} bytes, over its share of ${Math.floor(share).toLocaleString('en')} of the gateway's configuration; its largest routes are refused first`;
      out.set(r.route, why);
      bytes -= r.bytes;
      sets -= r.sets;
      for (const h of r.hostnames)
        if (!denied.has(h)) {
          denied.add(h);
          bytes += limits.denyBytes(h);
          sets++;
        }
    }
  }
  return out;
}
