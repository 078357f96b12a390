// netpolicy-controller figures on the network-policy scenario (10,000 pods): what it publishes
// (EffectivePolicy count and bytes), the time of a full computation, the controller's work per
// event (its PublishedState, as the controller runs it), and the writes one event causes: a pod
// joining or leaving an existing label set, and a pod with a new label set, for the
// EffectivePolicies, the policies' status and the PodAddressSlices the agents read; and a tenant's
// NetworkPolicy edit (its namespace's objects only) beside an admin's ANP edit (the objects its
// subject selects: one team's namespaces, and subjects of 5%, 50% and 100% of the namespaces). Writes are
// counted as the controller makes them: objects whose spec or conditions differ after the event,
// with the exact analysis due at every event (the most writes it can cause).
import {
  DEFAULT_ANALYSIS_INTERVAL_MS,
  deadNetworkPolicyRules,
  type NetPolicyObject,
  NetpolEngine,
  networkEffectiveSpec,
  type Pod,
  PublishedState,
  type PublishedUpdate,
  SlicePlanner,
} from '@cascade/netpolicy';
import { generateNetpolCluster, ISSUE_SCALE } from '../netpol-cluster.ts';
import { type Figure, ms } from '../report.ts';

const INPUT =
  '10,000 pods, 500 namespaces, 2,000 label sets, 100 ANPs x 20 rules, 1 BANP, 3,000 NPs (500 with ipBlocks)';

type State = { effective: Map<string, string>; conditions: Map<string, string> };

/** The controller's desired state after an event, `skip` ms after the previous one. */
function makeState(engine: NetpolEngine) {
  let now = 0;
  const published = new PublishedState({ now: () => now });
  return (skip: number): { s: State; u: PublishedUpdate; ms: number } => {
    engine.flush();
    now += skip;
    const t0 = process.hrtime.bigint();
    const u = published.update(engine);
    const took = ms(t0);
    const effective = new Map(
      [...published.effectives].map(([k, e]) => [k, JSON.stringify(networkEffectiveSpec(e))]),
    );
    const conditions = new Map([...published.conditions].map(([k, c]) => [k, JSON.stringify(c)]));
    return { s: { effective, conditions }, u, ms: took };
  };
}
/** Between two events: the exact analysis is due (DUE) or not (SOON). */
const DUE = DEFAULT_ANALYSIS_INTERVAL_MS + 1;
const SOON = 100;

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
  const state = makeState(engine);
  const first = state(DUE);
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
  fig('full computation: EffectivePolicies', first.u.ms.effectives, 'ms');
  fig(
    'full computation: policy conditions (without the exact analysis)',
    first.u.ms.structure + first.u.ms.conditions,
    'ms',
  );
  fig(
    'full computation: exact analysis (dead NetworkPolicy rules, entry budgets)',
    first.u.ms.population,
    'ms',
    `at most every ${DEFAULT_ANALYSIS_INTERVAL_MS / 1000} s on pod churn; at once on a policy change`,
  );

  // the dead-rule analysis is exact only within its evaluation budget: how much of it was checked
  const { dead, skipped } = deadNetworkPolicyRules(engine);
  fig(`exact analysis: dead NetworkPolicy rules found (of ${engine.rules.np.length})`, dead.length, 'rules');
  fig(
    'exact analysis: NetworkPolicy rules not checked (evaluation budget spent)',
    skipped,
    'rules',
    '0 (4,630 when pods were evaluated one by one)',
  );

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
    const next = state(DUE).s;
    const w = writes(prev, next);
    churn.push(w.effective + w.status);
    prev = next;
    engine.removePod(p.namespace, p.name);
    sliceChurn.push(sliceWrites(p, true));
    const back = state(DUE).s;
    const w2 = writes(prev, back);
    churn.push(w2.effective + w2.status);
    prev = back;
  }
  // the controller's work per churn event, events 100 ms apart (the exact analysis waits)
  for (let i = 0; i < 20; i++) {
    const like = pods[(i * 499) % pods.length]!;
    const p: Pod = { ...like, name: `${like.name}-twin`, ips: [`10.250.${i}.1`] };
    engine.upsertPod(p);
    churnMs.push(state(SOON).ms);
    engine.removePod(p.namespace, p.name);
    state(SOON);
  }
  prev = state(DUE).s;
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
    'pod churn inside a label set: nothing to recompute',
  );
  // a pod with a label set nobody had
  const newSet: { effective: number; status: number }[] = [];
  const newSetMs: number[] = [];
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
    const next = state(DUE);
    newSet.push(writes(prev, next.s));
    newSetMs.push(next.ms - next.u.ms.population);
    engine.removePod(p.namespace, p.name);
    sliceWrites(p, true);
    prev = state(DUE).s;
  }
  const med = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  // a tenant's NetworkPolicy edit (its first rule dropped, then put back), and an admin's ANP edit
  /** Applies each object in turn, recording the controller's work and writes after each. */
  const measure = (objs: NetPolicyObject[]) => {
    const out = {
      ms: [] as number[],
      analysis: [] as number[],
      effective: [] as number[],
      status: [] as number[],
    };
    for (const o of objs) {
      engine.upsertPolicy(o);
      const next = state(SOON);
      const w = writes(prev, next.s);
      out.ms.push(next.ms - next.u.ms.population);
      out.analysis.push(next.u.ms.population);
      out.effective.push(w.effective);
      out.status.push(w.status);
      prev = next.s;
    }
    return out;
  };
  /** `obj` with its first rule dropped (ingress if it has any, else egress). */
  const firstRuleDropped = (obj: NetPolicyObject): NetPolicyObject => {
    const spec = obj.spec as { ingress?: unknown[]; egress?: unknown[] };
    return {
      ...obj,
      spec: spec.ingress?.length
        ? { ...spec, ingress: spec.ingress.slice(1) }
        : { ...spec, egress: (spec.egress ?? []).slice(1) },
    };
  };
  const policyEdit = (kind: string) => {
    const all = [...engine.policies.values()].filter(
      (p) => p.obj.kind === kind && !p.built.errors.length && p.built.rules.length > 1,
    );
    return measure(
      Array.from({ length: 10 }, (_, i) => all[(i * 37) % all.length]!.obj).flatMap((obj) => [
        firstRuleDropped(obj),
        obj,
      ]),
    );
  };
  const np = policyEdit('NetworkPolicy');
  const anp = policyEdit('AdminNetworkPolicy');
  // an admin's ANP whose subject is a given share of the namespaces: its first rule dropped and put
  // back, 10 times (the objects it reaches are rebuilt, the NetworkPolicy rules of those namespaces
  // analysed again)
  const template = [...engine.policies.values()].find((p) => p.obj.kind === 'AdminNetworkPolicy')!.obj;
  const shareEdit = (share: number) => {
    const names = [...engine.namespaces.keys()].slice(0, Math.round(engine.namespaces.size * share));
    const spec = template.spec as { ingress?: unknown[]; egress?: unknown[] };
    const obj = {
      kind: 'AdminNetworkPolicy' as const,
      name: `bench-share-${share}`,
      spec: {
        ...spec,
        priority: 999,
        subject:
          share >= 1
            ? { namespaces: {} }
            : {
                namespaces: {
                  matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: names }],
                },
              },
      },
    };
    engine.upsertPolicy(obj);
    prev = state(SOON).s;
    const out = measure(Array.from({ length: 10 }, () => [firstRuleDropped(obj), obj]).flat());
    engine.removePolicy(`AdminNetworkPolicy/${obj.name}`);
    prev = state(SOON).s;
    return out;
  };
  /** The four figures of 20 edits: writes of objects and of status, the recompute, the analysis. */
  const editFigures = (what: string, x: ReturnType<typeof measure>, objects?: string, analysis?: string) => {
    fig(`writes per ${what}: EffectivePolicies (median of 20)`, med(x.effective), 'writes');
    fig(`writes per ${what}: policy status (median of 20)`, med(x.status), 'writes');
    fig(`recompute per ${what}: EffectivePolicies and conditions (median of 20)`, med(x.ms), 'ms', objects);
    fig(`recompute per ${what}: exact analysis (median of 20)`, med(x.analysis), 'ms', analysis);
  };
  for (const share of [0.05, 0.5, 1])
    editFigures(
      `AdminNetworkPolicy edit, subject ${share * 100}% of the namespaces`,
      shareEdit(share),
      share === 0.05 ? '<= 50 ms' : undefined,
    );
  fig(
    'writes per new label set: EffectivePolicies (median of 10)',
    med(newSet.map((w) => w.effective)),
    'writes',
  );
  fig('writes per new label set: policy status (median of 10)', med(newSet.map((w) => w.status)), 'writes');
  fig('writes per new label set: PodAddressSlices (median of 10)', med(newSliceSet), 'writes');
  fig('recompute per new label set, without the exact analysis (median of 10)', med(newSetMs), 'ms');
  editFigures('NetworkPolicy edit', np, "its namespace's objects only", 'its namespace only');
  editFigures(
    'AdminNetworkPolicy edit',
    anp,
    'the objects its subject selects',
    'the namespaces its subject selects',
  );

  return figures;
}
