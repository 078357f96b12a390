// A simulated 1,000-node cluster (100 pods per node, the netpolicy suite's policies): what one node
// agent holds and does when it watches every Pod, and when it watches its node's Pods and the
// netpolicy-controller's PodAddressSlices. Measured: the engine's memory and full computation at
// 100,000 pods, one node's datapath state, the work one remote pod change costs an agent, the slices
// (count, bytes, planning), the informer caches of both ways, and a minute of pod churn at 10 Pod
// watch events per second run through the controller's planner (slice writes are what every agent
// receives). Derived figures say so in their input.
import {
  AddressOwners,
  datapathState,
  NetpolEngine,
  type Pod,
  planSlices,
  SlicePlanner,
  type SliceSpec,
} from '@cascade/netpolicy';
import { generateNetpolCluster, ISSUE_SCALE } from '../netpol-cluster.ts';
import { podObject } from '../pod-object.ts';
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
  slices(fig, [...engine.pods.values()]);
  return figures;
}

type Fig = (name: string, value: number, unit: string, input?: string) => void;
const MiB = (b: number) => b / 1024 / 1024;

/** Heap held by what `make` builds (kept alive until measured). */
function heldMiB<T>(make: () => T): { value: T; mib: number } {
  const base = heapMiB();
  const value = make();
  return { value, mib: heapMiB() - base };
}

const sliceObject = (name: string, spec: SliceSpec) => ({
  apiVersion: 'cascade.dev/v1alpha1',
  kind: 'PodAddressSlice',
  metadata: {
    name,
    uid: '7c1d2e3f-0000-4000-8000-000000000000',
    resourceVersion: '123456',
    creationTimestamp: '2026-11-24T08:00:00Z',
    labels: { 'app.kubernetes.io/managed-by': 'netpolicy-controller' },
  },
  spec,
});

function slices(fig: Fig, pods: Pod[]): void {
  const t0 = process.hrtime.bigint();
  const plan = planSlices(new Map(), pods);
  fig('controller: PodAddressSlices planned from nothing', ms(t0), 'ms');
  fig('PodAddressSlices', plan.size, 'objects');
  const sizes = [...plan].map(([n, s]) => JSON.stringify(sliceObject(n, s)).length);
  fig('PodAddressSlices: total size', MiB(sizes.reduce((a, b) => a + b, 0)), 'MiB');
  fig('PodAddressSlices: largest', Math.max(...sizes) / 1024, 'KiB');
  const podBytes = JSON.stringify(podObject(pods[0]!, 0)).length;
  fig('one Pod object as served (a Deployment pod: managedFields, probes, status)', podBytes / 1024, 'KiB');
  // informer caches: every Pod (measured on 10,000 and scaled to 100,000), or the node's and the slices
  const sample = heldMiB(
    () => new Map(pods.slice(0, 10_000).map((p, i) => [p.name, JSON.parse(JSON.stringify(podObject(p, i)))])),
  );
  const allPodsMiB = sample.mib * (pods.length / 10_000);
  sample.value.clear();
  fig(
    "agent watching every Pod: informer cache of the cluster's Pod objects",
    allPodsMiB,
    'MiB',
    `${INPUT}; measured on 10,000 Pod objects, scaled to 100,000`,
  );
  const mine = pods.filter((p) => p.node === 'node-0');
  const sliced = heldMiB(() => ({
    slices: new Map([...plan].map(([n, s]) => [n, JSON.parse(JSON.stringify(sliceObject(n, s)))])),
    pods: new Map(mine.map((p, i) => [p.name, JSON.parse(JSON.stringify(podObject(p, i)))])),
  }));
  fig("agent with slices: informer cache (its node's 100 Pods and every slice)", sliced.mib, 'MiB');
  sliced.value.slices.clear();
  // a minute of churn: rolling replacements, each pod's life as its watch events (created, scheduled,
  // address, ready; deleting, not ready, deleted), 10 events per second, one planning pass per event
  // (no coalescing: the most writes the controller can issue), through the controller's incremental
  // planner as the publisher drives it
  // the pods' events as data (key, the pod as its watch shows it, or undefined when deleted)
  const events: [string, Pod | undefined][] = [];
  for (let k = 0; events.length < 600; k++) {
    const old = pods[(k * 7919) % pods.length]!;
    const fresh: Pod = { ...old, name: `${old.name}-r${k}`, node: `node-${(k * 31) % 1000}` };
    const key = (p: Pod) => `${p.namespace}/${p.name}`;
    const ip = [`10.250.${k >> 8}.${k & 255}`];
    events.push(
      [key(fresh), { ...fresh, ips: [] }], // ADDED: pending
      [key(fresh), { ...fresh, ips: [] }], // scheduled
      [key(fresh), { ...fresh, ips: ip }], // address assigned, running
      [key(fresh), { ...fresh, ips: ip }], // ready
      [key(old), old], // deletionTimestamp set
      [key(old), old], // not ready
      [key(old), undefined], // DELETED
    );
  }
  /** Slice writes for the minute of events, with a planning pass every `batch` events. */
  const simulate = (batch: number, passes?: number[]) => {
    const owners = new AddressOwners();
    for (const p of pods) owners.claim(`${p.namespace}/${p.name}`, p);
    const planner = new SlicePlanner();
    planner.load(plan);
    let writes = 0;
    events.slice(0, 600).forEach(([k, pod], i) => {
      owners.claim(k, pod);
      const t = process.hrtime.bigint();
      planner.update(k, owners.claimOf(k));
      if ((i + 1) % batch !== 0) return;
      writes += planner.flush().size;
      passes?.push(ms(t)); // with batch 1: the pass after one event
    });
    return writes;
  };
  const passes: number[] = [];
  const writes = simulate(1, passes);
  // --slice-updates-batch-period=1s: the events of one second (10) in one pass
  const batchedWrites = simulate(10);
  fig('controller: one planning pass after a pod event (median of 600)', summarize(passes).median, 'ms');
  fig('controller: one planning pass after a pod event (p99 of 600)', summarize(passes).p99, 'ms');
  const churn = `${INPUT}; one minute of rolling replacements at 10 Pod watch events/s (7 per replacement), a planning pass per event`;
  fig('agent with slices: PodAddressSlice watch events per agent', writes, 'events/min', churn);
  fig(
    'agent with slices, --slice-updates-batch-period=1s: PodAddressSlice watch events per agent',
    batchedWrites,
    'events/min',
    `${churn.replace(', a planning pass per event', '')}, a planning pass per second`,
  );
  fig(
    "agent with slices: its own node's Pod watch events",
    600 / 1000,
    'events/min',
    `${churn}; derived: 1/1,000 of the pods`,
  );
  fig('agent watching every Pod: Pod watch events per agent', 600, 'events/min', churn);
  const meanSlice = sizes.reduce((a, b) => a + b, 0) / sizes.length;
  fig(
    'agent with slices: watch bytes per agent',
    (writes * meanSlice + 0.6 * podBytes) / 1024,
    'KiB/min',
    `${churn}; derived: mean slice size`,
  );
  fig(
    'agent watching every Pod: watch bytes per agent',
    (600 * podBytes) / 1024,
    'KiB/min',
    `${churn}; derived: one Pod object per event`,
  );
  fig(
    'API server with slices: watch events sent (1,000 agents + the controller)',
    writes * 1000 + 600 + 600,
    'events/min',
    `${churn}; derived`,
  );
  fig(
    'API server, every agent watching every Pod: watch events sent',
    600 * 1000,
    'events/min',
    `${churn}; derived`,
  );
  fig(
    'API server objects for pod addresses: Pods + PodAddressSlices',
    pods.length + plan.size + 1,
    'objects',
  );
}
