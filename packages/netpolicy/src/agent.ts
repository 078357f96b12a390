// The node agent: informers for Namespaces, Pods, Nodes, NetworkPolicies and the network-policy-api
// kinds feed the NetpolEngine; one coalesced sync lowers the engine's state for this node and applies
// it to the BPF datapath (build beside, switch, free: never a verdict neither policy gives). Local pods
// whose host-side interface is named (annotation cascade.dev/host-interface, set by the CNI
// integration) get the program attached at tc. A rule set that does not fit is refused by the
// datapath (last good kept; a new endpoint fails closed) and reported here (log, metrics).
import type { Server } from 'node:http';
import type { COUNTERS, Datapath, SyncReport } from '@cascade/bpf-datapath';
import {
  Informer,
  type InformerEvent,
  jsonLogger,
  type KubeClient,
  type KubeObject,
  type Logger,
  Metrics,
  startInformers,
  WorkQueue,
} from '@cascade/core';
import { datapathState } from './datapath.ts';
import { NetpolEngine } from './engine.ts';
import { type NetPolicyObject, namespaceFromObject, nodeFromObject, podFromObject } from './model.ts';

export const HOST_INTERFACE_ANNOTATION = 'cascade.dev/host-interface';

export interface AgentOptions {
  client: KubeClient;
  /** This node's name: its local pods are the endpoints this datapath enforces. */
  node: string;
  datapath: Datapath;
  log?: Logger;
  metricsPort?: number;
}

const POLICY_PATHS: [NetPolicyObject['kind'], string, boolean][] = [
  ['NetworkPolicy', '/apis/networking.k8s.io/v1/networkpolicies', false],
  ['AdminNetworkPolicy', '/apis/policy.networking.k8s.io/v1alpha1/adminnetworkpolicies', true],
  [
    'BaselineAdminNetworkPolicy',
    '/apis/policy.networking.k8s.io/v1alpha1/baselineadminnetworkpolicies',
    true,
  ],
  ['ClusterNetworkPolicy', '/apis/policy.networking.k8s.io/v1alpha2/clusternetworkpolicies', true],
];

export class NetpolAgent {
  readonly engine = new NetpolEngine();
  readonly metrics = new Metrics();
  readonly syncs = this.metrics.counter('cascade_datapath_syncs_total', 'Datapath syncs');
  readonly entriesWritten = this.metrics.counter(
    'cascade_datapath_entries_written_total',
    'Policy map entries written',
  );
  readonly refusals = this.metrics.counter('cascade_datapath_refused_total', 'Rule sets refused (map full)');
  private readonly errors = this.metrics.counter('cascade_datapath_sync_errors_total', 'Failed syncs');
  private readonly latency = this.metrics.histogram(
    'cascade_datapath_sync_seconds',
    'Event to datapath synced',
  );
  lastReport?: SyncReport;
  /** The kernel's verdict counters as last read (at start, then every 10 s). */
  private packets: Partial<Record<keyof typeof COUNTERS, number>> = {};
  private housekeepingTimer?: NodeJS.Timeout;
  private housekeepingRuns = 0;
  readonly conntrackCollected = this.metrics.counter(
    'cascade_datapath_conntrack_collected_total',
    'Conntrack entries deleted by the collector (idle or closed flows)',
  );
  private conntrackEntries = 0;
  private readonly informers: Informer[] = [];
  private readonly queue: WorkQueue;
  private readonly opts: AgentOptions;
  private readonly log: Logger;
  private readonly attached = new Map<string, string>();
  private server?: Server;
  private started = false;
  private lastProblems = '';

  constructor(opts: AgentOptions) {
    this.opts = opts;
    this.log = opts.log ?? jsonLogger('cascade-netpol-agent');
    this.queue = new WorkQueue(() => this.sync(), 1);
    this.queue.onError = (_k, e) => {
      this.errors.inc();
      this.log('warn', 'datapath sync failed, retrying', { error: String(e) });
    };
    const c = opts.client;
    const raw = (o: KubeObject) => ({ metadata: o.metadata, spec: o.spec, status: o.status });
    const on = (f: (t: InformerEvent, o: KubeObject) => void) => (t: InformerEvent, o: KubeObject) => {
      f(t, o);
      this.queue.add('sync');
    };
    this.informers.push(
      new Informer(
        c,
        '/api/v1/namespaces',
        on((t, o) => {
          if (t === 'DELETED') return; // its pods are deleted with it
          const ns = namespaceFromObject(raw(o));
          if ('error' in ns)
            this.log('warn', 'ignoring namespace', { name: o.metadata.name, error: ns.error });
          else this.engine.upsertNamespace(ns);
        }),
      ),
      new Informer(
        c,
        '/api/v1/nodes',
        on((t, o) => {
          if (t === 'DELETED') return;
          const n = nodeFromObject(raw(o));
          if ('error' in n) this.log('warn', 'ignoring node', { name: o.metadata.name, error: n.error });
          else this.engine.upsertNode(n);
        }),
      ),
      new Informer(
        c,
        '/api/v1/pods',
        on((t, o) => {
          const ns = o.metadata.namespace ?? 'default';
          const p = t === 'DELETED' ? undefined : podFromObject(raw(o));
          if (p && 'error' in p) {
            this.log('warn', 'ignoring pod', { pod: `${ns}/${o.metadata.name}`, error: p.error });
            return;
          }
          // A pod without an address yet has no identity to enforce: it arrives with its IP.
          if (!p || p.ips.length === 0) this.engine.removePod(ns, o.metadata.name);
          else this.engine.upsertPod(p);
        }),
      ),
    );
    for (const [kind, path, optional] of POLICY_PATHS) {
      this.informers.push(
        new Informer(
          c,
          path,
          on((t, o) => {
            const obj: NetPolicyObject = { kind, name: o.metadata.name, spec: o.spec };
            if (kind === 'NetworkPolicy') obj.namespace = o.metadata.namespace ?? 'default';
            if (t === 'DELETED')
              this.engine.removePolicy(
                obj.namespace ? `${kind}/${obj.namespace}/${obj.name}` : `${kind}/${obj.name}`,
              );
            else this.engine.upsertPolicy(obj);
          }),
          undefined,
          optional,
        ),
      );
    }
    this.metrics.gauge('cascade_datapath_endpoints', 'Local endpoints enforced', () =>
      this.lastReport ? this.localPods().length : 0,
    );
    this.metrics.gauge(
      'cascade_datapath_fail_closed',
      'Endpoints failing closed (rule set refused)',
      () => this.lastReport?.failClosed.length ?? 0,
    );
  }

  get ready(): boolean {
    return this.started && this.informers.every((i) => i.synced) && this.lastReport !== undefined;
  }

  async start(): Promise<void> {
    for (const [name, help] of [
      ['allow', 'Flows allowed (first packets, and re-judged ones)'],
      ['deny', 'Packets denied'],
      ['ctHit', 'Packets of known flows (conntrack hit)'],
      ['ctRejudged', 'Flows judged again after a policy change'],
      ['malformed', 'Frames dropped as too short for their headers'],
      ['notEndpoint', 'Packets of addresses that are not a local endpoint'],
      ['verdictCached', 'First packets answered by the verdict cache'],
    ] as const)
      this.metrics.counterFrom(
        `cascade_datapath_packets_${name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}_total`,
        help,
        () => this.packets[name] ?? 0,
      );
    this.metrics.gauge(
      'cascade_datapath_conntrack_entries',
      'Conntrack entries at the last collection',
      () => this.conntrackEntries,
    );
    await this.housekeeping();
    this.housekeepingTimer = setInterval(() => void this.housekeeping(), 10_000);
    this.housekeepingTimer.unref();
    const synced = startInformers(this.informers);
    if (this.opts.metricsPort !== undefined)
      this.server = await this.metrics.serve(this.opts.metricsPort, () => this.ready);
    await synced;
    this.started = true;
    this.queue.add('sync');
    this.log('info', 'caches synced', { node: this.opts.node });
  }

  async stop(): Promise<void> {
    clearInterval(this.housekeepingTimer);
    for (const i of this.informers) i.stop();
    this.queue.stop();
    await this.queue.drain();
    await new Promise((r) => (this.server ? this.server.close(r) : r(undefined)));
  }

  async idle(): Promise<void> {
    await this.queue.drain();
  }

  /**
   * Every 10 s: reads the kernel's verdict counters for /metrics and advances conntrack's clock;
   * every 30 s also collects idle and closed flows (TCP 6 h, closing TCP 10 s, others 60 s). Not in
   * the first 90 s: while no agent ran, the clock stood still and live flows kept stamping its last
   * value; they need one idle period of a moving clock to show they are alive.
   */
  async housekeeping(): Promise<void> {
    const dp = this.opts.datapath;
    try {
      this.packets = await dp.counters();
      const run = this.housekeepingRuns++;
      if (run >= 9 && run % 3 === 0) {
        const r = await dp.collectConntrack();
        this.conntrackCollected.inc(r.deleted);
        this.conntrackEntries = r.scanned - r.deleted;
      } else await dp.tick();
    } catch (e) {
      this.log('warn', 'datapath housekeeping failed', { error: String(e) });
    }
  }

  private localPods() {
    return [...this.engine.pods.values()].filter((p) => p.node === this.opts.node);
  }

  private async sync(): Promise<void> {
    if (!this.started) return;
    const t0 = process.hrtime.bigint();
    this.engine.flush();
    const problems = JSON.stringify(this.engine.problems());
    if (problems !== this.lastProblems) {
      this.lastProblems = problems;
      for (const p of this.engine.problems())
        for (const e of [...p.errors, ...p.warnings])
          this.log('warn', 'policy problem', { policy: p.policy, problem: e });
    }
    const report = await this.opts.datapath.sync(datapathState(this.engine, this.opts.node));
    this.lastReport = report;
    this.syncs.inc();
    this.entriesWritten.inc(report.entriesWritten);
    for (const r of report.refused) {
      this.refusals.inc();
      this.log('error', 'rule set refused: the policy map is full; the last good rule set stays', r);
    }
    if (report.failClosed.length)
      this.log('error', 'endpoints fail closed until their rule set fits', { endpoints: report.failClosed });
    await this.attachLocal();
    this.latency.observe(Number(process.hrtime.bigint() - t0) / 1e9);
  }

  /** Attach to the host-side interface of every local pod that names one (after its rules are in). */
  private async attachLocal(): Promise<void> {
    const pods = this.informers.find((i) => i.path === '/api/v1/pods')!.cache;
    const want = new Map<string, string>();
    for (const o of pods.values()) {
      const iface = o.metadata.annotations?.[HOST_INTERFACE_ANNOTATION];
      const node = (o.spec as { nodeName?: string } | undefined)?.nodeName;
      if (iface && node === this.opts.node) want.set(`${o.metadata.namespace}/${o.metadata.name}`, iface);
    }
    for (const [pod, iface] of want) {
      if (this.attached.get(pod) === iface) continue;
      try {
        await this.opts.datapath.attach(iface);
        this.attached.set(pod, iface);
        this.log('info', 'attached', { pod, interface: iface });
      } catch (e) {
        this.log('warn', 'attach failed; retried on the next sync', {
          pod,
          interface: iface,
          error: String(e),
        });
      }
    }
    for (const [pod, iface] of [...this.attached]) {
      if (want.has(pod)) continue;
      this.attached.delete(pod);
      await this.opts.datapath.detach(iface).catch(() => {}); // usually gone with the pod
    }
  }
}
