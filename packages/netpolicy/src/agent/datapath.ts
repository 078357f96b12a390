// The engine's state for one node, in the datapath's terms (bpf-datapath's DesiredState): the ipcache
// as that node's agent sees it, its endpoints, and their rule-set layers with numeric rule ids.
import { type DesiredState, EP_FLAGS, type TableEntry, TEST_RUN_IFINDEX } from '@cascade/bpf-datapath';
import { formatPrefix, hostPrefix, type Prefix } from '../engine/cidr.ts';
import { DIRECTIONS, LAYERS, type NetpolEngine } from '../engine/engine.ts';
import { ID } from '../engine/identities.ts';
import type { MapState } from '../engine/mapstate.ts';
import type { ServiceCatalog } from '../engine/services.ts';
import type { LayerIds } from '../engine/table-store.ts';

export interface NodeDatapathState extends DesiredState {
  /** Numeric rule id (in map values and flow events) -> rule id string. */
  rules: Map<number, string>;
  /** Pods whose staged tables were left out for the node's staged budget (not judged by the staged set). */
  stagedLeftOut: string[];
}

/** Entries the tables only staged policies use may add to one node's policy map (the rest is left out). */
export const DEFAULT_STAGED_ENTRY_BUDGET = 100_000;

/**
 * Per engine, kept across calls so that an agent's sync after a small change reuses the converted
 * tables: rule numbers (stable, so a converted table stays valid) and each table's entries as the
 * datapath takes them, by MapState version. Dropped when the rule numbers pass a million (policy churn).
 */
interface Converted {
  ruleIds: Map<string, number>;
  rules: Map<number, string>;
  tables: WeakMap<MapState, { version: number; entries: TableEntry[] }>;
  /** by the engine's ipcache, then by the catalog's untranslated ClusterIPs */
  ipcache: WeakMap<object, WeakMap<readonly string[], DesiredState['ipcache']>>;
}
const converted = new WeakMap<NetpolEngine, Converted>();
/** Prefix text by prefix object (host prefixes are shared objects, see cidr.hostPrefix). */
const formatted = new WeakMap<Prefix, string>();
const NONE: readonly string[] = [];
/** Every (direction, layer) of an endpoint's table ids. */
const LAYER_IDS = DIRECTIONS.flatMap((d) => LAYERS.map((l) => [d, l] as const));

export interface DatapathStateOptions {
  /**
   * The host-side interface (ifindex) of a local pod address, found from the kernel by the agent;
   * undefined while it is not known: such an address gets no endpoint (where a CNI plugin attached the
   * program already, its packets are dropped until then). Default: every address on the loopback,
   * where BPF_PROG_TEST_RUN runs packets (offline: the CLI, the demo, tests).
   */
  ifindexOf?: (ip: string) => number | undefined;
  /** Services to translate at the pods' interfaces (absent: the Service maps are left alone). */
  services?: ServiceCatalog;
  /**
   * Namespaces whose pods' allowed first packets the kernel reports too (EP_FLAGS.AUDIT_ALLOW: the
   * flows then show allowed flows beside denied ones), within each endpoint's event budget.
   */
  auditNamespaces?: ReadonlySet<string>;
  /**
   * Entries the staged set's own tables (those no enforced rule set of the node uses) may add; pods past
   * it (in the engine's order) are not judged by the staged set on this node, and said so.
   */
  stagedEntryBudget?: number;
}

/** Desired datapath state of the agent on `node` (every pod when node is undefined, e.g. offline). */
export function datapathState(
  engine: NetpolEngine,
  node?: string,
  opts: DatapathStateOptions = {},
): NodeDatapathState {
  const ifindexOf = opts.ifindexOf ?? (() => TEST_RUN_IFINDEX);
  let c = converted.get(engine);
  if (!c || c.ruleIds.size > 1_000_000) {
    c = { ruleIds: new Map(), rules: new Map(), tables: new WeakMap(), ipcache: new WeakMap() };
    converted.set(engine, c);
  }
  const { ruleIds, rules } = c;
  const ruleNumber = (id: string) => {
    let n = ruleIds.get(id);
    if (n === undefined) {
      n = ruleIds.size + 1;
      ruleIds.set(id, n);
      rules.set(n, id);
    }
    return n;
  };
  const tables = new Map<string, TableEntry[]>();
  const adminTables = new Set<string>();
  const endpoints: DesiredState['endpoints'] = [];
  /** A table's entries in the datapath's terms, converted once per MapState version. */
  const entriesOf = (id: string): TableEntry[] => {
    const state = engine.tables.get(id)!.state;
    let done = c.tables.get(state);
    if (done?.version !== state.version) {
      done = {
        version: state.version,
        entries: [...state.entries()].map((e) => ({
          identity: e.identity,
          proto: e.proto,
          port: e.port,
          plen: e.plen,
          precedence: e.precedence,
          verdict: e.verdict,
          rule: ruleNumber(e.rule),
        })),
      };
      c.tables.set(state, done);
    }
    return done.entries;
  };
  /** Endpoints with staged tables, given them once every enforced table is known (the budget). */
  const stagedCandidates: { key: string; refs: LayerIds; at: DesiredState['endpoints'] }[] = [];
  for (const [key, pod] of engine.pods) {
    if (node !== undefined && pod.node !== node) continue;
    const identity = engine.podIdentity.get(key);
    const refs = identity === undefined ? undefined : engine.endpointTables.get(identity);
    if (identity === undefined || !refs) continue;
    const bound = pod.ips.flatMap((ip) => {
      const ifindex = ifindexOf(ip);
      return ifindex === undefined ? [] : [{ ip, ifindex }];
    });
    if (!bound.length) continue;
    for (const [d, layer] of LAYER_IDS) {
      const id = refs[d][layer];
      if (layer === 'admin') adminTables.add(id);
      if (!tables.has(id)) tables.set(id, entriesOf(id));
    }
    const staged = engine.stagedEndpointTables.get(identity);
    const mine: DesiredState['endpoints'] = [];
    if (staged) stagedCandidates.push({ key, refs: staged, at: mine });
    for (const { ip, ifindex } of bound) {
      mine.push({
        ip,
        identity,
        flags:
          EP_FLAGS.ENFORCE_INGRESS |
          EP_FLAGS.ENFORCE_EGRESS |
          (opts.auditNamespaces?.has(pod.namespace) ? EP_FLAGS.AUDIT_ALLOW : 0),
        tables: refs,
        ifindex,
      });
    }
    endpoints.push(...mine);
  }
  // The staged set's tables, within the node's staged budget, after every enforced table (the loader
  // writes them in this order, so in one sync a staged table never takes room an enforced one needs).
  let stagedBudget = opts.stagedEntryBudget ?? DEFAULT_STAGED_ENTRY_BUDGET;
  const stagedLeftOut: string[] = [];
  for (const { key, refs, at } of stagedCandidates) {
    const fresh = [...new Set(LAYER_IDS.map(([d, l]) => refs[d][l]))].filter((id) => !tables.has(id));
    const cost = fresh.reduce((n, id) => n + entriesOf(id).length, 0);
    if (cost > stagedBudget) {
      stagedLeftOut.push(key);
      continue;
    }
    stagedBudget -= cost;
    for (const id of fresh) tables.set(id, entriesOf(id));
    for (const [d, l] of LAYER_IDS) if (l === 'admin') adminTables.add(refs[d][l]);
    for (const ep of at) ep.staged = refs;
  }
  // engine.ipcache(node) is memoised until the next change: convert it once per change too. The
  // ClusterIPs of Services the node's budgets left out (memoised by the catalog) join it as
  // UNTRANSLATED, which the program denies: never judged as the world they would otherwise fall in.
  const raw = engine.ipcache(node);
  const untranslated = opts.services?.untranslated(node) ?? NONE;
  let byRaw = c.ipcache.get(raw);
  if (!byRaw) c.ipcache.set(raw, (byRaw = new WeakMap()));
  let ipcache = byRaw.get(untranslated);
  if (!ipcache) {
    ipcache = raw.map((e) => {
      let prefix = formatted.get(e.prefix);
      if (prefix === undefined) formatted.set(e.prefix, (prefix = formatPrefix(e.prefix)));
      return { prefix, identity: e.identity };
    });
    for (const ip of untranslated) {
      const p = hostPrefix(ip);
      if (p) ipcache.push({ prefix: formatPrefix(p), identity: ID.UNTRANSLATED });
    }
    byRaw.set(untranslated, ipcache);
  }
  return {
    ipcache,
    endpoints,
    tables,
    adminTables,
    rules,
    stagedLeftOut,
    ...(opts.services ? { services: opts.services.desired(node) } : {}),
    // the node's own addresses (HOST) are judged as its node identity (admin tier, baseline)
    ...(node !== undefined ? { hostIdentity: engine.nodeIdentity.get(node) ?? 0 } : {}),
  };
}
