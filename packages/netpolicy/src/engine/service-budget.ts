// Which Services a node translates when its Service maps cannot hold them all. Services are written by
// tenants, and the maps are the node's: without budgets, the Services of a namespace that sorts early
// could take every frontend and leave later namespaces (kube-system's DNS included) untranslated. So:
//   - the reserved namespaces (kube-system and the admin's list) are served first, with no budget,
//     up to the maps' capacity;
//   - every other Service, oldest first (its creationTimestamp, then its name: what was admitted before
//     is never pushed out by what comes later), up to its tenant's budget of frontends and backend
//     slots (tenants.ts: the namespaces sharing the admin's tenant label, or one namespace, so one
//     owner's many namespaces share one budget): a Service that does not fit is refused whole (never
//     some of its ports), and only that tenant's Services are refused;
//   - what no budget stopped but the maps cannot hold is refused too (said as such): the newest.
// Round three: in name order, 17 early-named namespaces of one owner, each inside its budget, filled
// the node and pushed out payments/ledger, older than all of them.
// A refused Service is left out of the translation maps; its ClusterIPs fail closed in the datapath (a
// new flow to them is dropped, never judged as the world: see datapath.ts). Plain data in and out.
import { MAX_BACKEND_SLOTS, MAX_BACKENDS, MAX_FRONTENDS } from '@cascade/bpf-datapath/layout';
import type { Frontend } from './services.ts';
import { describeTenant } from './tenants.ts';

export interface ServiceBudget {
  /** Frontends (ClusterIP or NodePort, per port and family) one tenant may take on a node. */
  frontends: number;
  /** Backend slots (a frontend's backends, at most MAX_BACKENDS each) one tenant may take. */
  backends: number;
  /** Namespaces served first and without a namespace budget (kube-system and the admin's list). */
  reserved: readonly string[];
}

export const DEFAULT_SERVICE_BUDGET: ServiceBudget = {
  frontends: 2048,
  backends: 16_384,
  reserved: ['kube-system'],
};

export interface RefusedService {
  /** `ns/name` */
  service: string;
  namespace: string;
  name: string;
  /** the Service's ClusterIPs (they fail closed) */
  clusterIPs: string[];
  /** why, for the Event and the log */
  reason: string;
}

/** The capacity the budgets share (the loader's own caps, which they keep from being reached). */
export interface ServiceCapacity {
  frontends: number;
  backends: number;
}
const CAPACITY: ServiceCapacity = { frontends: MAX_FRONTENDS, backends: MAX_BACKEND_SLOTS };

/**
 * Frontends grouped by Service (`key`, in the catalog's order), each frontend's backend slots as the
 * loader will write them.
 */
export function applyServiceBudget(
  frontends: readonly Frontend[],
  budget: ServiceBudget,
  capacity: ServiceCapacity = CAPACITY,
  by: {
    /** a namespace's tenant (default: the namespace) */
    tenantOf?: (namespace: string) => string;
    /** a Service's creationTimestamp ('' when unknown: then by name) */
    createdOf?: (key: string) => string;
  } = {},
): { admitted: Frontend[]; refused: RefusedService[] } {
  const tenantOf = by.tenantOf ?? ((ns: string) => ns);
  const createdOf = by.createdOf ?? (() => '');
  const byService = new Map<string, Frontend[]>();
  for (const f of frontends) {
    const l = byService.get(f.key);
    if (l) l.push(f);
    else byService.set(f.key, [f]);
  }
  const reserved = new Set(budget.reserved);
  const nsOf = (key: string) => key.slice(0, key.indexOf('/'));
  // reserved namespaces first (in the catalog's order), then the others oldest first, then by name
  const keys = [...byService.keys()];
  const created = new Map(keys.map((k) => [k, createdOf(k)]));
  const others = keys
    .filter((k) => !reserved.has(nsOf(k)))
    .sort((a, b) => {
      const ca = created.get(a)!;
      const cb = created.get(b)!;
      return ca !== cb ? (ca < cb ? -1 : 1) : a < b ? -1 : a > b ? 1 : 0;
    });
  const order = [...keys.filter((k) => reserved.has(nsOf(k))), ...others];
  const admitted: Frontend[] = [];
  const refused: RefusedService[] = [];
  const used = new Map<string, { frontends: number; backends: number }>();
  let total = { frontends: 0, backends: 0 };
  for (const key of order) {
    const fs = byService.get(key)!;
    const ns = nsOf(key);
    const tenant = tenantOf(ns);
    const need = {
      frontends: fs.length,
      backends: fs.reduce((s, f) => s + Math.min(f.backends.length, MAX_BACKENDS), 0),
    };
    const mine = used.get(tenant) ?? { frontends: 0, backends: 0 };
    let reason: string | undefined;
    if (
      !reserved.has(ns) &&
      (mine.frontends + need.frontends > budget.frontends || mine.backends + need.backends > budget.backends)
    )
      reason = `${describeTenant(tenant)} is over its Service budget on this node (${budget.frontends} frontends, ${budget.backends} backend slots; its older Services take ${mine.frontends} and ${mine.backends}, this one needs ${need.frontends} and ${need.backends})`;
    else if (
      total.frontends + need.frontends > capacity.frontends ||
      total.backends + need.backends > capacity.backends
    )
      reason = `the node's Service maps are full (${capacity.frontends} frontends, ${capacity.backends} backend slots)`;
    if (reason) {
      const clusterIPs = [...new Set(fs.filter((f) => !f.nodePort).map((f) => f.addr))];
      refused.push({ service: key, namespace: ns, name: key.slice(ns.length + 1), clusterIPs, reason });
      continue;
    }
    if (!reserved.has(ns))
      used.set(tenant, {
        frontends: mine.frontends + need.frontends,
        backends: mine.backends + need.backends,
      });
    total = { frontends: total.frontends + need.frontends, backends: total.backends + need.backends };
    admitted.push(...fs);
  }
  return { admitted, refused };
}
