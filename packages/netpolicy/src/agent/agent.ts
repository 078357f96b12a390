// The node agent: informers for Namespaces, Pods, Nodes, NetworkPolicies and the network-policy-api
// kinds feed the NetpolEngine, Services and EndpointSlices the ServiceCatalog (cluster/watch.ts); one coalesced sync lowers the engine's state for this node and applies
// it to the BPF datapath (build beside, switch, free: never a verdict neither policy gives). A local
// pod's host-side interface is found from the kernel (route, neighbour, bridge FDB: see
// bpf-datapath's interfaces.ts), never from pod metadata; its endpoint is bound to that interface,
// then the program is attached there. Attachments are reconciled against the kernel's tc hooks and
// never removed by the agent (an interface whose pod is gone or unknown keeps the program and drops
// everything: default deny for unknown endpoints). Only running pods with their own network own pod
// addresses; two live owners of one address: the newest wins, reported (log, metric). A rule set
// that does not fit is refused by the datapath (last good kept; a new endpoint fails closed) and
// reported here (log, metrics). With podSource 'slices' every pod, this node's included, comes from
// the netpolicy-controller's PodAddressSlices and the agent reads no Pod (cluster/watch.ts).
import type { Server } from 'node:http';
import {
  type COUNTERS,
  cniChained,
  type FlowEvent,
  KernelInterfaces,
  runCommand,
  type SyncReport,
} from '@cascade/bpf-datapath';
import {
  type Informer,
  jsonLogger,
  type Logger,
  Metrics,
  startInformers,
  WorkQueue,
  watchHealth,
} from '@cascade/core/kube';
import type { NodeReportSpec } from '../cluster/node-report.ts';
import { AddressOwners } from '../cluster/owners.ts';
import { SLICES_PUBLISHED, SliceIndex } from '../cluster/slices.ts';
import { clusterInformers } from '../cluster/watch.ts';
import { DEFAULT_NAMESPACE_ENTRY_BUDGET, enforceNamespaceBudget, type Refusal } from '../engine/budget.ts';
import { NetpolEngine } from '../engine/engine.ts';
import { ServiceCatalog } from '../engine/services.ts';
import { datapathState } from './datapath.ts';
import { datapathMetrics } from './datapath-metrics.ts';
import { NodeFindings } from './findings.ts';
import { FlowLog, serveRules, serveTenantMetrics } from './flows.ts';
import { preferNodeSource, readInterfaces, tunnelAddresses } from './host-source.ts';
import type { AgentOptions } from './options.ts';
import { PodLinks } from './pod-links.ts';
import { NodeReporter } from './report.ts';

export class NetpolAgent {
  readonly engine: NetpolEngine;
  readonly metrics = new Metrics();
  /**
   * Series that name tenants' policies: served on /metrics to loopback peers only (a pod reaches the
   * node's address, never its loopback), like /flows and /rules.
   */
  readonly tenantMetrics = new Metrics();
  readonly syncs = this.metrics.counter('cascade_datapath_syncs_total', 'Datapath syncs');
  readonly unchangedSyncs = this.metrics.counter(
    'cascade_datapath_syncs_unchanged_total',
    'Syncs (the 30-s drift checks, mostly) whose desired state would be built from what the last one was: not rebuilt',
  );
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
  /** Endpoint addresses judged by staged tables too at the last sync, and pods the staged budget left out. */
  private stagedEndpoints = { judged: 0, leftOut: 0 };
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
  private readonly owners = new AddressOwners();
  /** This node's NetpolNodeReport: what the controller relays as Events. */
  private readonly reporter: NodeReporter;
  /** Refused Services, address conflicts: logged once per change, and the report's findings. */
  private readonly found: NodeFindings;
  /** Cluster changes seen (informers, watch recoveries): part of what the desired state is built from. */
  private inputs = 0;
  /** The engine revisions the last problems were read at. */
  private problemsAt = '';
  /** What the last good sync built its desired state from (syncDesired): the same again, no rebuild. */
  private lastDesiredFrom?: string;
  /** Every pod from the PodAddressSlices (podSource 'slices'). */
  readonly slices: SliceIndex;
  private readonly podSource?: { slices: SliceIndex; namespace?: string };
  /** Services and EndpointSlices: the frontends translated to their backends in the datapath. */
  readonly services: ServiceCatalog;
  readonly serviceRefusals = this.metrics.counter(
    'cascade_datapath_services_refused_total',
    'Services refused for their namespace Service budget or full maps (untranslated, ClusterIPs fail closed)',
  );
  /** Denied (and audited) flows from the kernel, named: GET /flows, and one JSON log line each. */
  readonly flows = new FlowLog();
  private lastRules: ReadonlyMap<number, string> = new Map();
  private flowTimer?: NodeJS.Timeout;
  /** NetworkPolicies refused for their namespace's budget: enforced as their isolation only. */
  readonly refusedPolicies = new Map<string, Refusal>();
  readonly budgetRefusals = this.metrics.counter(
    'cascade_netpol_policies_refused_total',
    'NetworkPolicies refused for their namespace policy-map budget (enforced as isolation only)',
  );
  readonly addressConflicts = this.metrics.counter(
    'cascade_datapath_address_conflicts_total',
    'Pod addresses claimed by two live pods (the newest owns it)',
  );
  private readonly links: PodLinks;
  /** When the node's own traffic to its pods was last given the node's address (host-source.ts). */
  private sourceCheckedAt = 0;
  /** The pod bridges' addresses the last source check saw (its node's report says them). */
  private bridgeAddresses: string[] = [];
  /** The node's tunnel-device addresses the last check saw (its report says them; every agent adds them to the node). */
  private tunnelAddresses: string[] = [];
  /** cascade-cni in the node's CNI chain, as last read (identity()), and when. */
  private cniChain: 'chained' | 'absent' = 'absent';
  private cniCheckedAt = Number.NEGATIVE_INFINITY;
  private sourceCheckedFor = '';
  readonly attachFailures = this.metrics.counter(
    'cascade_datapath_attach_failures_total',
    'Failed attachments of the programs to a pod interface (retried)',
  );
  private server?: Server;
  private started = false;
  private stopped = false;
  private lastProblems = '';
  private tenancySeen = 0;

  constructor(opts: AgentOptions) {
    this.opts = opts;
    this.engine = new NetpolEngine({
      ...(opts.foreignIdentityCap !== undefined ? { foreignIdentityCap: opts.foreignIdentityCap } : {}),
      ...(opts.tenantLabel !== undefined ? { tenantLabel: opts.tenantLabel } : {}),
    });
    this.services = new ServiceCatalog(opts.serviceBudget);
    this.services.setTenants((ns) => this.engine.tenantOf(ns));
    this.slices = new SliceIndex();
    if (opts.podSource === 'slices')
      this.podSource = {
        slices: this.slices,
        ...(opts.ownNamespace ? { namespace: opts.ownNamespace } : {}),
      };
    this.log = opts.log ?? jsonLogger('cascade-netpol-agent');
    this.links = new PodLinks(
      opts.interfaces ?? new KernelInterfaces({ recordDir: opts.cniRecordDir ?? '/run/cascade/cni' }),
      this.log,
    );
    this.found = new NodeFindings({
      node: opts.node,
      services: this.services,
      owners: this.owners,
      refusedPolicies: this.refusedPolicies,
      log: this.log,
      serviceRefusals: this.serviceRefusals,
      addressConflicts: this.addressConflicts,
    });
    this.reporter = new NodeReporter({
      client: opts.client,
      node: opts.node,
      log: this.log,
      metrics: this.metrics,
    });
    this.queue = new WorkQueue(() => this.sync(), 1, { registry: this.metrics, name: 'netpol-agent' });
    this.queue.onError = (_k, e) => {
      this.errors.inc();
      this.log('warn', 'datapath sync failed, retrying', { error: String(e) });
    };
    this.watchCluster();
    this.observe();
  }

  /** The cluster's watch set (cluster/watch.ts): pods from the slices or every Pod, as configured. */
  private watchCluster(): void {
    this.informers.push(
      ...clusterInformers({
        client: this.opts.client,
        engine: this.engine,
        services: this.services,
        owners: this.owners,
        refusedPolicies: this.refusedPolicies,
        log: this.log,
        changed: () => {
          this.inputs++;
          this.queue.add('sync');
        },
        ownersChanged: () => this.found.reportConflicts(),
        staged: true,
        ...(this.podSource ? { podSource: this.podSource } : {}),
      }),
    );
  }

  /**
   * The agent's gauges, and watch failures: the datapath keeps enforcing what it has while a watch
   * fails (logged once and counted), and the sync after recovery catches up.
   */
  private observe(): void {
    this.metrics.gauge(
      'cascade_agent_slice_pods',
      'Pods of other nodes known from PodAddressSlices (0 when every Pod is watched)',
      () => this.slices.size,
    );
    this.metrics.gauge('cascade_datapath_endpoints', 'Local endpoints enforced', () =>
      this.lastReport ? this.localPods().length : 0,
    );
    this.metrics.processMetrics();
    watchHealth(this.informers, this.metrics, this.log, 'the datapath keeps what it enforces', () => {
      this.inputs++;
      this.queue.add('sync');
    });
    this.metrics.gauge(
      'cascade_datapath_services_refused',
      'Services refused now on this node (namespace budget or full maps)',
      () => this.found.servicesRefused,
    );
    this.metrics.gauge(
      'cascade_netpol_policies_refused',
      'NetworkPolicies refused now for their namespace policy-map budget',
      () => this.refusedPolicies.size,
    );
    this.metrics.gauge(
      'cascade_datapath_attached_interfaces',
      'Interfaces carrying the programs (read from the kernel at the last sync)',
      () => this.links.attachedCount,
    );
    this.metrics.gauge(
      'cascade_datapath_fail_closed',
      'Endpoints failing closed (rule set refused)',
      () => this.lastReport?.failClosed.length ?? 0,
    );
  }

  /** The port /metrics, /healthz, /readyz and /flows are served on (metricsPort 0 picks one). */
  get port(): number | undefined {
    const addr = this.server?.address();
    return addr && typeof addr === 'object' ? addr.port : undefined;
  }

  get ready(): boolean {
    return this.started && this.informers.every((i) => i.synced) && this.lastReport !== undefined;
  }

  /** With podSource 'slices': no complete set of slices seen yet, so the datapath is not touched. */
  get waitingForSlices(): boolean {
    return this.podSource !== undefined && !this.slices.published;
  }

  async start(): Promise<void> {
    datapathMetrics(this.metrics, this.tenantMetrics, {
      packets: (name) => this.packets[name] ?? 0,
      policySamples: () => this.flows.policySamples(),
      stagedSamples: () => this.flows.stagedSamples(),
      stagedEndpoints: () => this.stagedEndpoints,
      conntrackEntries: () => this.conntrackEntries,
      flowCache: () => ({ slots: this.opts.datapath.flowSlots, bytes: this.opts.datapath.flowCacheBytes }),
    });
    await this.housekeeping();
    this.housekeepingTimer = setInterval(() => void this.housekeeping(), 10_000);
    this.housekeepingTimer.unref();
    const synced = startInformers(this.informers);
    const bind =
      this.opts.metricsBindAddress ??
      (this.opts.metricsPort !== undefined ? { host: '127.0.0.1', port: this.opts.metricsPort } : undefined);
    if (bind)
      this.server = await this.metrics.serveOn(
        bind,
        () => this.ready,
        'all',
        (req, res) =>
          serveTenantMetrics(req, res, this.metrics, this.tenantMetrics) ||
          this.flows.handle(req, res) ||
          serveRules(req, res, this.lastRules),
      );
    this.flowTimer = setInterval(() => void this.drainFlows(), 1000);
    this.flowTimer.unref();
    await synced;
    // Slices but no marker yet (a new install, no controller leading yet): the datapath is not
    // touched until a complete set is out (pinned maps keep their verdicts; a new node's pods fail
    // closed at CNI ADD, the release namespace's excepted: cascade-cni's exemptNamespace).
    if (this.waitingForSlices) {
      this.log('info', 'no PodAddressSlices published yet: the datapath waits for them', {
        marker: `PodAddressSlice/${SLICES_PUBLISHED}`,
      });
      void (async () => {
        while (this.waitingForSlices && !this.stopped) await new Promise((r) => setTimeout(r, 50));
        if (this.stopped) return;
        this.started = true;
        this.queue.add('sync');
        this.log('info', 'PodAddressSlices published: enforcing', { pods: this.slices.size });
      })();
    } else {
      this.started = true;
      this.queue.add('sync');
    }
    this.log('info', 'caches synced', { node: this.opts.node });
  }

  /**
   * What the node's report says of this agent (undefined without an identity: tests). The CNI
   * configuration is read at most every 30 s, not at every sync.
   */
  private identity(): NodeReportSpec['agent'] {
    const id = this.opts.identity;
    if (!id) return undefined;
    const dir = this.opts.cniConfDir;
    if (dir && Date.now() - this.cniCheckedAt >= 30_000) {
      this.cniChain = cniChained(dir) ? 'chained' : 'absent';
      this.cniCheckedAt = Date.now();
    }
    return { ...id, cniChain: dir ? this.cniChain : 'unknown' };
  }

  async stop(): Promise<void> {
    clearInterval(this.housekeepingTimer);
    clearInterval(this.flowTimer);
    for (const i of this.informers) i.stop();
    this.stopped = true;
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
      // every 30 s: interfaces found again and attachments checked against the kernel (drift)
      if (run % 3 === 2 && this.started) this.queue.add('sync');
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
    // what this sync builds from, read before the engine is flushed: a change that arrives later (an
    // informer event while a step below awaits) makes the next sync's key differ, so it is never
    // taken as already built (the CI run of 5286ebd lost a ClusterNetworkPolicy that way)
    const from = `${this.inputs}|${this.engine.policyRevision}|${this.engine.populationRevision}`;
    this.engine.flush();
    // a namespace changed tenant: the Service budgets are shared anew
    if (this.tenancySeen !== this.engine.tenancyRevision) {
      this.tenancySeen = this.engine.tenancyRevision;
      this.services.setTenants((ns) => this.engine.tenantOf(ns));
    }
    const budget = this.opts.namespaceEntryBudget ?? DEFAULT_NAMESPACE_ENTRY_BUDGET;
    for (const r of enforceNamespaceBudget(this.engine, budget, this.opts.node)) {
      this.refusedPolicies.set(r.policy, r);
      this.budgetRefusals.inc();
      this.log('error', 'NetworkPolicy refused: its tenant is over its policy map budget', {
        policy: r.policy,
        namespace: r.namespace,
        entries: r.entries,
        reason: r.reason,
      });
    }
    // the policies' problems, logged when they change (read again only after a change: a drift check
    // on a quiet node reads nothing)
    const revisions = `${this.engine.policyRevision}|${this.engine.populationRevision}`;
    const problems =
      revisions === this.problemsAt ? this.lastProblems : JSON.stringify(this.engine.problems());
    this.problemsAt = revisions;
    if (problems !== this.lastProblems) {
      this.lastProblems = problems;
      for (const p of this.engine.problems())
        for (const e of [...p.errors, ...p.warnings])
          this.log('warn', 'policy problem', { policy: p.policy, problem: e });
    }
    await this.links.resolve(new Set(this.localPods().flatMap((p) => p.ips)), () => this.queue.add('sync'));
    await this.syncDesired(from);
    this.found.reportRefusedServices();
    if (this.opts.manageAttachments !== false)
      await this.links.reconcile(this.opts.datapath, () => this.attachFailures.inc());
    await this.checkNodeAddresses();
    await this.reporter.publish(
      this.found.findings(),
      { bridges: this.bridgeAddresses, tunnels: this.tunnelAddresses },
      this.identity(),
      this.flows.stagedWindow(),
    );
    this.latency.observe(Number(process.hrtime.bigint() - t0) / 1e9);
  }

  /**
   * The node's desired kernel state built and synced, unless it would be built from exactly what the
   * last good sync built it from (no cluster change, no policy or population change in the engine,
   * the same pod interfaces) and that sync left nothing refused or failing closed: the 30-s drift
   * check then costs the interface and attachment checks only, not a rebuild of every rule set.
   */
  private async syncDesired(inputs: string): Promise<void> {
    const from = `${inputs}|${[...this.links.ifindexByIp].sort().join(',')}`;
    const last = this.lastReport;
    if (from === this.lastDesiredFrom && last && !last.refused.length && !last.failClosed.length) {
      this.unchangedSyncs.inc();
      return;
    }
    const desired = datapathState(this.engine, this.opts.node, {
      ifindexOf: (ip) => this.links.ifindexByIp.get(ip),
      services: this.services,
      ...(this.opts.auditNamespaces?.length ? { auditNamespaces: new Set(this.opts.auditNamespaces) } : {}),
      ...(this.opts.stagedEntryBudget !== undefined
        ? { stagedEntryBudget: this.opts.stagedEntryBudget }
        : {}),
    });
    this.lastDesiredFrom = undefined;
    const report = await this.opts.datapath.sync(desired);
    this.lastDesiredFrom = from;
    this.lastRules = desired.rules;
    this.lastReport = report;
    this.stagedEndpoints = {
      judged: desired.endpoints.filter((e) => e.staged).length - report.stagedRefused.length,
      leftOut: desired.stagedLeftOut.length,
    };
    if (desired.stagedLeftOut.length)
      this.log('warn', "staged policies not judged for pods over the node's staged budget", {
        pods: desired.stagedLeftOut.slice(0, 20),
        count: desired.stagedLeftOut.length,
      });
    this.syncs.inc();
    this.entriesWritten.inc(report.entriesWritten);
    for (const r of report.refused) {
      this.refusals.inc();
      this.log('error', 'rule set refused: the policy map is full; the last good rule set stays', r);
    }
    if (report.failClosed.length)
      this.log('error', 'endpoints fail closed until their rule set fits', { endpoints: report.failClosed });
  }

  /** Drains the kernel's flow events (every second): named, rate-limited per flow, logged, kept. */
  async drainFlows(): Promise<void> {
    try {
      const events = await this.opts.datapath.events();
      if (!events.length) return;
      const answerable = (e: FlowEvent) => {
        const local = this.owners.ownerOf(e.direction === 'ingress' ? e.dst : e.src);
        return local ? this.engine.stagedOf(local) : [];
      };
      for (const r of this.flows.add(
        events,
        (ip) => this.owners.ownerOf(ip),
        this.lastRules,
        this.opts.node,
        Date.now(),
        answerable,
      ))
        this.log('info', 'flow', { ...r });
    } catch (e) {
      this.log('warn', 'reading flow events failed', { error: String(e) });
    }
  }

  /**
   * The node's own addresses read from its interfaces (host-source.ts), checked when the set of local
   * pod interfaces changed and every 30 s (a bridge or tunnel re-created by its CNI): its tunnel
   * devices' addresses, for its report; and, with preferNodeSource, its own traffic to its pods made to
   * leave with the node's address.
   */
  private async checkNodeAddresses(): Promise<void> {
    const ifindexes = new Set(this.links.ifindexByIp.values());
    const key = [...ifindexes].sort().join(',');
    if (key === this.sourceCheckedFor && Date.now() - this.sourceCheckedAt < 30_000) return;
    this.sourceCheckedFor = key;
    this.sourceCheckedAt = Date.now();
    try {
      const seen = await readInterfaces(runCommand);
      this.tunnelAddresses = tunnelAddresses(seen);
      if (this.opts.preferNodeSource !== true) return;
      // the node's addresses: its Node's (InternalIP first), then the tunnel addresses its report adds
      const nodeIps = this.engine.nodes.get(this.opts.node)?.ips ?? [];
      const { fixes, bridgeAddresses } = await preferNodeSource(runCommand, nodeIps, ifindexes, seen);
      this.bridgeAddresses = bridgeAddresses;
      for (const f of fixes)
        this.log('info', "the node's traffic to its pods now leaves with the node's address", { ...f });
    } catch (e) {
      this.log(
        'warn',
        "reading the node's addresses or setting its source towards its pods failed; retried",
        {
          error: String(e),
        },
      );
    }
  }
}
