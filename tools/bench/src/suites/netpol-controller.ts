// netpolicy-controller figures on the network-policy scenario (10,000 pods): what it publishes
// (EffectivePolicy count and bytes), the time of a full computation, and the writes one event
// causes: a pod joining or leaving an existing label set, and a pod with a new label set, for the
// EffectivePolicies, the policies' status and the PodAddressSlices the agents read. Writes are
// counted as the controller makes them: objects whose spec or conditions differ after the event.
import {
  NetpolEngine,
  networkEffectiveSpec,
  networkEffectives,
  networkPolicyConditions,
  type Pod,
  SlicePlanner,
} from '@cascade/netpolicy';
import { generateNetpolCluster, ISSUE_SCALE } from '../netpol-cluster.ts';
import { type Figure, ms } from '../report.ts';

const INPUT =
  '10,000 pods, 500 namespaces, 2,000 label sets, 100 ANPs x 20 rules, 1 BANP, 3,000 NPs (500 with ipBlocks)';

type State = { effective: Map<string, string>; conditions: Map<string, string> };

function state(engine: NetpolEngine): { s: State; msEffective: number; msConditions: number } {
  engine.flush();
  let t0 = process.hrtime.bigint();
  const effective = new Map(
    networkEffectives(engine).map((e) => [
      `${e.namespace}/${e.name}`,
      JSON.stringify(networkEffectiveSpec(e)),
    ]),
  );
  const msEffective = ms(t0);
  t0 = process.hrtime.bigint();
  const conditions = new Map([...networkPolicyConditions(engine)].map(([k, c]) => [k, JSON.stringify(c)]));
  return { s: { effective, conditions }, msEffective, msConditions: ms(t0) };
}

/** Objects created, changed or deleted between two states (what the controller would write). */
function writes(a: State, b: State): { effective: number; status: number } {
  const diff = (x: Map<string, string>, y: Map<string, string>) => {
    let n = 0;
    for (const [k, v] of y) if (x.get(k) !== v) n++;
    for (const k of x.keys()) if (!y.has(k)) n++;
    return n;
  };
  return { effective: diff(a.effective, b.effective), status: diff(a.conditions, b.conditions) };
}

export async function run(): Promise<Figure[]> {
  const figures: Figure[] = [];
  const fig = (name: string, value: number, unit: string, target?: string) =>
    figures.push({
      suite: 'netpol-controller',
      name,
      value,
      unit,
      input: INPUT,
      ...(target ? { target } : {}),
    });
  const engine = NetpolEngine.fromCluster(generateNetpolCluster(ISSUE_SCALE));
  const first = state(engine);
  let bytes = 0;
  let max = 0;
  for (const v of first.s.effective.values()) {
    bytes += v.length;
    max = Math.max(max, v.length);
  }
  fig(
    'EffectivePolicies of kind Network (one per namespace and pod label set)',
    first.s.effective.size,
    'objects',
  );
  fig('EffectivePolicies: total spec bytes', bytes / 1024 / 1024, 'MiB');
  fig('EffectivePolicies: largest spec', max / 1024, 'KiB', '< 1024 KiB (etcd object limit 1.5 MiB)');
  fig('full computation: EffectivePolicies', first.msEffective, 'ms');
  fig('full computation: policy conditions (with the exact dead-rule lint)', first.msConditions, 'ms');

  const pods = [...engine.pods.values()];
  // the PodAddressSlices the agents read, through the controller's incremental planner
  const planner = new SlicePlanner();
  for (const p of pods) planner.update(`${p.namespace}/${p.name}`, p);
  planner.flush();
  fig('PodAddressSlices', planner.size, 'objects');
  const sliceWrites = (p: Pod, gone = false) => {
    planner.update(`${p.namespace}/${p.name}`, gone ? undefined : p);
    return planner.flush().size;
  };
  const sliceChurn: number[] = [];
  // a pod joining an existing label set, then leaving it: 20 of each
  let prev = first.s;
  const churn: number[] = [];
  const churnMs: number[] = [];
  for (let i = 0; i < 20; i++) {
    const like = pods[(i * 499) % pods.length]!;
    const p: Pod = { ...like, name: `${like.name}-twin`, ips: [`10.250.${i}.1`] };
    engine.upsertPod(p);
    sliceChurn.push(sliceWrites(p));
    const t0 = process.hrtime.bigint();
    const next = state(engine).s;
    churnMs.push(ms(t0));
    const w = writes(prev, next);
    churn.push(w.effective + w.status);
    prev = next;
    engine.removePod(p.namespace, p.name);
    sliceChurn.push(sliceWrites(p, true));
    const back = state(engine).s;
    const w2 = writes(prev, back);
    churn.push(w2.effective + w2.status);
    prev = back;
  }
  fig(
    'writes per pod churn event inside an existing label set (max of 40)',
    Math.max(...churn),
    'writes',
    '0',
  );
  fig('PodAddressSlice writes per pod churn event (max of 40)', Math.max(...sliceChurn), 'writes', '1');
  fig(
    'recompute per event (EffectivePolicies and conditions, median of 20)',
    churnMs.sort((a, b) => a - b)[10]!,
    'ms',
  );
  // a pod with a label set nobody had
  const newSet: { effective: number; status: number }[] = [];
  const newSliceSet: number[] = [];
  for (let i = 0; i < 10; i++) {
    const like = pods[(i * 997) % pods.length]!;
    const p: Pod = {
      ...like,
      name: `${like.name}-new`,
      labels: { ...like.labels, variant: `v${i}` },
      ips: [`10.251.${i}.1`],
    };
    engine.upsertPod(p);
    newSliceSet.push(sliceWrites(p));
    const next = state(engine).s;
    newSet.push(writes(prev, next));
    prev = next;
    engine.removePod(p.namespace, p.name);
    sliceWrites(p, true);
    prev = state(engine).s;
  }
  const med = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  fig(
    'writes per new label set: EffectivePolicies (median of 10)',
    med(newSet.map((w) => w.effective)),
    'writes',
  );
  fig('writes per new label set: policy status (median of 10)', med(newSet.map((w) => w.status)), 'writes');
  fig('writes per new label set: PodAddressSlices (median of 10)', med(newSliceSet), 'writes');
  return figures;
}
