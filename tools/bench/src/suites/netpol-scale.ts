// A simulated 1,000-node cluster (100 pods per node, the netpolicy suite's policies): what one node
// agent holds and does today, when every agent watches every Pod. Measured: the engine's memory and
// full computation at 100,000 pods, one node's datapath state, and the work one remote pod change
// costs an agent. Derived (marked so in the input): watch events per agent and for the API server
// under 10 pod changes per second.
import { datapathState, NetpolEngine, type Pod } from '@cascade/netpolicy';
import { generateNetpolCluster, ISSUE_SCALE } from '../netpol-cluster.ts';
import { type Figure, ms, summarize } from '../report.ts';

const SCALE = { ...ISSUE_SCALE, pods: 100_000, nodes: 1000 };
const INPUT =
  '1,000 nodes x 100 pods = 100,000 pods, 500 namespaces, 2,000 label sets, 100 ANPs x 20 rules, 1 BANP, 3,000 NPs';

const heapMiB = () => {
  (globalThis as { gc?: () => void }).gc?.();
  return process.memoryUsage().heapUsed / 1024 / 1024;
};

export async function run(): Promise<Figure[]> {
  const figures: Figure[] = [];
  const fig = (name: string, value: number, unit: string, input = INPUT) =>
    figures.push({ suite: 'netpol-scale', name, value, unit, input });
  const cluster = generateNetpolCluster(SCALE);
  const base = heapMiB();
  let t0 = process.hrtime.bigint();
  const engine = NetpolEngine.fromCluster(cluster);
  engine.flush();
  fig('agent today: full computation (every pod of the cluster)', ms(t0), 'ms');
  fig(
    "agent today: engine heap for every pod of the cluster (the informers' Pod objects come on top)",
    heapMiB() - base,
    'MiB',
  );
  t0 = process.hrtime.bigint();
  const mine = datapathState(engine, 'node-0');
  fig("agent today: one node's datapath state", ms(t0), 'ms');
  fig("one node's endpoints", mine.endpoints.length, 'endpoints');
  fig("one node's ipcache entries (every pod address, CIDRs, nodes)", mine.ipcache.length, 'entries');
  // remote pod changes: a pod on another node gets a new address (a restart), 200 times
  const pods = [...engine.pods.values()].filter((p) => p.node !== 'node-0');
  const times: number[] = [];
  for (let i = 0; i < 200; i++) {
    const p = pods[(i * 7919) % pods.length]!;
    const moved: Pod = { ...p, ips: [`10.254.${i >> 8}.${i & 255}`] };
    const t = process.hrtime.bigint();
    engine.upsertPod(moved);
    engine.flush();
    datapathState(engine, 'node-0');
    times.push(ms(t));
  }
  fig(
    'agent today: one remote pod change (engine and node state, median of 200)',
    summarize(times).median,
    'ms',
  );
  fig('agent today: one remote pod change (p99 of 200)', summarize(times).p99, 'ms');
  const derived = `${INPUT}; derived: 10 pod changes/s, counting one watch event per change (a pod's life has several)`;
  fig('agent today: Pod watch events per agent', 10 * 60, 'events/min', derived);
  fig(
    'agent today: Pod watch events the API server sends (1,000 agents)',
    10 * 60 * 1000,
    'events/min',
    derived,
  );
  fig(
    'own-node Pod watch (fieldSelector spec.nodeName): events per agent',
    (10 * 60) / 1000,
    'events/min',
    derived,
  );
  return figures;
}
