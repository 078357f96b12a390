// The engine's state for one node, in the datapath's terms (bpf-datapath's DesiredState): the ipcache
// as that node's agent sees it, its endpoints, and their rule-set layers with numeric rule ids.
import { type DesiredState, EP_FLAGS, type TableEntry } from '@cascade/bpf-datapath';
import { formatPrefix } from './cidr.ts';
import type { NetpolEngine } from './engine.ts';

export interface NodeDatapathState extends DesiredState {
  /** Numeric rule id (in map values and flow events) -> rule id string. */
  rules: Map<number, string>;
}

/** Desired datapath state of the agent on `node` (every pod when node is undefined, e.g. offline). */
export function datapathState(engine: NetpolEngine, node?: string): NodeDatapathState {
  const ruleIds = new Map<string, number>();
  const rules = new Map<number, string>();
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
  const endpoints: DesiredState['endpoints'] = [];
  for (const pod of engine.pods.values()) {
    if (node !== undefined && pod.node !== node) continue;
    const identity = engine.podIdentity.get(`${pod.namespace}/${pod.name}`);
    const refs = identity === undefined ? undefined : engine.endpointTables.get(identity);
    if (identity === undefined || !refs) continue;
    for (const d of ['ingress', 'egress'] as const) {
      for (const layer of ['admin', 'lower'] as const) {
        const id = refs[d][layer];
        if (tables.has(id)) continue;
        const t = engine.tables.get(id)!;
        tables.set(
          id,
          [...t.state.entries()].map((e) => ({
            identity: e.identity,
            proto: e.proto,
            port: e.port,
            plen: e.plen,
            precedence: e.precedence,
            verdict: e.verdict,
            rule: ruleNumber(e.rule),
          })),
        );
      }
    }
    for (const ip of pod.ips) {
      endpoints.push({
        ip,
        identity,
        flags: EP_FLAGS.ENFORCE_INGRESS | EP_FLAGS.ENFORCE_EGRESS,
        tables: refs,
      });
    }
  }
  const ipcache = engine.ipcache(node).map((e) => ({ prefix: formatPrefix(e.prefix), identity: e.identity }));
  return { ipcache, endpoints, tables, rules };
}
