// netpolicy-controller: the cluster-level view of network policy. It watches what the node agents
// watch (Namespaces, Nodes, Pods, NetworkPolicy, ANP/BANP v1alpha1, CNP v1alpha2), runs the same
// engine, and, while it holds the lease, publishes:
// - one EffectivePolicy (policyKind Network) per (namespace, pod label set), so a tenant with `view`
//   on the namespace reads the admin rules that affect their pods (published.ts);
// - status conditions on every AdminNetworkPolicy, BaselineAdminNetworkPolicy and
//   ClusterNetworkPolicy (NetworkPolicy has no status in the API: a Warning Event on it instead);
// - PodAddressSlices (slices.ts, slice-publisher.ts): every pod's addresses by label set, so node
//   agents can watch those and their own node's Pods instead of every Pod of the cluster. They are
//   planned on their own queue key, never behind the EffectivePolicy computation.
// Writes are skipped when the live object already says the same, so a restart writes nothing.
// What to publish is kept by PublishedState (published-state.ts): pod churn inside existing pod
// identities recomputes nothing, and only the EffectivePolicies whose live object moved are compared.

import type { Server } from 'node:http';
import { EFFECTIVE_GROUP, logPublishChange, MANAGED_BY, PublishLedger } from '@cascade/core';
import {
  type BindAddress,
  electedLeader,
  Informer,
  jsonLogger,
  type KubeClient,
  type LeaderElector,
  type Logger,
  Metrics,
  postWarningEvent,
  startInformers,
  WorkQueue,
  watchHealth,
} from '@cascade/core/kube';
import { NODE_REPORT_PATH } from '../cluster/node-report.ts';
import { AddressOwners } from '../cluster/owners.ts';
import { clusterInformers, POLICY_PATHS } from '../cluster/watch.ts';
import { NetpolEngine } from '../engine/engine.ts';
import { CappedNamespaceReport } from './capped-namespaces.ts';
import { type Failed, NetworkPublisher } from './network-publisher.ts';
import type { NetworkEffective } from './published.ts';
import { DEFAULT_ANALYSIS_INTERVAL_MS, PublishedState, type PublishedUpdate } from './published-state.ts';
import { ReportRelay } from './report-relay.ts';
import { SlicePublisher } from './slice-publisher.ts';
import { StagedStatus } from './staged-status.ts';

export interface NetpolControllerOptions {
  client: KubeClient;
  /** Field manager, lease and label value (default netpolicy-controller). */
  name?: string;
  leaseNamespace?: string;
  leaseDurationSeconds?: number;
  identity?: string;
  log?: Logger;
  /** /metrics, /healthz, /readyz on 127.0.0.1 at this port (0 picks one; tests). */
  metricsPort?: number;
  /** controller-runtime's --metrics-bind-address: /metrics there. */
  metricsBindAddress?: BindAddress;
  /** controller-runtime's --health-probe-bind-address: /healthz and /readyz there. */
  healthProbeBindAddress?: BindAddress;
  /** Full reconcile at least this often (default 600 s): informers relist, the queue runs. */
  resyncSeconds?: number;
  /** Publish PodAddressSlices (default true; the agents' --pod-source=slices reads them). */
  publishSlices?: boolean;
  /**
   * On pod churn, the exact analyses of the cluster (dead NetworkPolicy rules, entry budgets) run at
   * most this often (default 30 s); a policy change runs them at once.
   */
  analysisIntervalSeconds?: number;
  /** The agents' namespace entry budget, for the budget findings (default 100,000). */
  entryBudget?: number;
  /** The agents' --foreign-identity-cap (engine/identity-cap.ts): published rules must be theirs. */
  foreignIdentityCap?: number;
  /** The agents' --tenant-label (engine/tenants.ts): budgets and caps must be theirs. */
  tenantLabel?: string;
  /**
   * Pod changes wait this long (ms) to be written to PodAddressSlices with the changes that follow
   * (kube-controller-manager's --endpointslice-updates-batch-period): fewer slice writes, and watch
   * events to every agent, in a rollout; remote agents learn a new pod's address that much later.
   * Default 0: at once.
   */
  sliceBatchMillis?: number;
}

const EP_PATH = `/apis/${EFFECTIVE_GROUP}/v1alpha1`;
export class NetpolController {
  readonly engine: NetpolEngine;
  readonly metrics = new Metrics();
  readonly writes = this.metrics.counter(
    'cascade_writes_issued_total',
    'API writes issued (apply, status, delete, event)',
  );
  readonly skipped = this.metrics.counter(
    'cascade_writes_skipped_total',
    'Writes skipped because the live object already matched',
  );
  readonly sliceWrites = this.metrics.counter(
    'cascade_netpol_slice_writes_total',
    'PodAddressSlice writes issued (apply, delete); the other writes are in cascade_writes_issued_total',
  );
  private readonly errors = this.metrics.counter('cascade_reconcile_errors_total', 'Failed reconciles');
  private readonly name: string;
  private readonly client: KubeClient;
  private readonly log: Logger;
  /** Namespaces past the identity cap: Event, log, metric. */
  private readonly capped: CappedNamespaceReport;
  /** Agents' NetpolNodeReports, and what of them is posted as Events. */
  private readonly reports: Informer;
  private readonly relay: ReportRelay;
  /** Staged policies' Accepted conditions (staged-status.ts). */
  private readonly staged: StagedStatus;
  private readonly informers: Informer[];
  private readonly effective: Informer;
  private readonly owners = new AddressOwners();
  readonly slices?: SlicePublisher;
  private readonly policyInformers = new Map<string, Informer>();
  private readonly queue: WorkQueue;
  private readonly elector: LeaderElector;
  private readonly opts: NetpolControllerOptions;
  /** Objects whose last write failed (logged, counted, each retried on its own). */
  readonly ledger = new PublishLedger(this.metrics);
  private readonly publisher: NetworkPublisher;
  private readonly servers: Server[] = [];
  private resync?: NodeJS.Timeout;
  private started = false;
  /** What to publish, kept up to date with the engine. */
  readonly state: PublishedState;
  /** Next reconcile recomputes everything and compares every object (start, new leader, resync). */
  private full = true;
  /** Next reconcile compares every EffectivePolicy (a failed pass). */
  private compareAll = false;
  /** EffectivePolicies whose live object moved (ours echoed, or someone else's edit or delete). */
  private readonly movedEffective = new Set<string>();
  /** EffectivePolicies whose write failed for a passing reason: compared again after a backoff. */
  private readonly retryEffective = new Set<string>();
  private analysisTimer?: NodeJS.Timeout;
  private sliceTimer?: NodeJS.Timeout;
  /** The last update, for tests and figures. */
  lastUpdate?: PublishedUpdate;

  constructor(opts: NetpolControllerOptions) {
    this.opts = opts;
    this.engine = new NetpolEngine({
      ...(opts.foreignIdentityCap !== undefined ? { foreignIdentityCap: opts.foreignIdentityCap } : {}),
      ...(opts.tenantLabel !== undefined ? { tenantLabel: opts.tenantLabel } : {}),
    });
    this.name = opts.name ?? 'netpolicy-controller';
    this.client = opts.client;
    this.log = opts.log ?? jsonLogger(this.name);
    this.state = new PublishedState({
      analysisIntervalMs: (opts.analysisIntervalSeconds ?? DEFAULT_ANALYSIS_INTERVAL_MS / 1000) * 1000,
      ...(opts.entryBudget ? { entryBudget: opts.entryBudget } : {}),
    });
    this.queue = this.newQueue();
    this.informers = this.watchCluster();
    if (opts.publishSlices !== false) this.slices = this.newSlicePublisher();
    for (const inf of this.informers)
      for (const [kind, paths] of POLICY_PATHS)
        if (inf.paths[0] === paths[0]) this.policyInformers.set(kind, inf);
    this.effective = this.watchEffective();
    this.publisher = this.newPublisher();
    this.ledger.onChange = (object, failure) => logPublishChange(this.log, object, failure);
    this.reports = this.informers.find((i) => i.paths[0] === NODE_REPORT_PATH)!;
    this.relay = new ReportRelay({
      client: this.client,
      reports: this.reports,
      log: this.log,
      writes: this.writes,
    });
    this.capped = this.newCappedReport();
    this.staged = new StagedStatus({
      client: this.client,
      name: this.name,
      engine: this.engine,
      changed: () => this.queue.add('staged'),
      writes: this.writes,
      skipped: this.skipped,
      log: this.log,
      reports: () => this.reports.cache.values(),
    });
    this.informers.push(...this.staged.informers);
    this.observe();
    this.elector = electedLeader(this.client, { ...opts, name: this.name }, this.metrics, this.log, () => {
      this.slices?.resync(); // another leader may have written since
      this.full = true;
      this.queue.add('slices');
      this.queue.add('sync');
      this.queue.add('reports');
      this.queue.add('staged');
    });
  }

  /**
   * Four keys: 'slices' (cheap, latency matters to enforcement), 'sync' (EffectivePolicies, status),
   * 'reports' (agents' findings relayed as Events, report-relay.ts) and 'staged' (staged policies'
   * status, staged-status.ts).
   */
  private newQueue(): WorkQueue {
    const q = new WorkQueue(
      (k) =>
        k === 'slices'
          ? this.reconcileSlices()
          : k === 'reports'
            ? this.relayReports()
            : k === 'staged'
              ? this.reconcileStaged()
              : this.reconcile(),
      2,
      { registry: this.metrics, name: this.name },
    );
    q.onError = (_k, e) => {
      this.errors.inc();
      this.log('warn', 'reconcile failed, retrying', { error: String(e) });
    };
    return q;
  }

  /** The cluster's watch set (cluster/watch.ts) feeding the engine; a pod's change marks its slice. */
  private watchCluster(): Informer[] {
    return clusterInformers({
      client: this.client,
      engine: this.engine,
      owners: this.owners,
      refusedPolicies: new Map(),
      log: this.log,
      changed: () => this.queue.add('sync'),
      ownersChanged: () => {},
      podChanged: (key) => {
        if (!this.slices) return;
        this.slices.touch(key);
        this.slicesSoon();
      },
      reportChanged: () => this.queue.add('reports'),
    });
  }

  /** The PodAddressSlices writer, its informer and gauge. */
  private newSlicePublisher(): SlicePublisher {
    const slices = new SlicePublisher({
      client: this.client,
      name: this.name,
      namespace: this.opts.leaseNamespace ?? 'default',
      owners: this.owners,
      changed: () => this.queue.add('slices'),
      writes: this.sliceWrites,
      skipped: this.skipped,
    });
    this.informers.push(slices.informer);
    this.metrics.gauge('cascade_netpol_pod_address_slices', 'PodAddressSlices published', () => slices.size);
    return slices;
  }

  /** Our EffectivePolicies: one edited or deleted by someone else is compared again. */
  private watchEffective(): Informer {
    const effective = new Informer(
      this.client,
      `${EP_PATH}/effectivepolicies?labelSelector=${encodeURIComponent(`${MANAGED_BY}=${this.name}`)}`,
      (_t, o) => {
        this.movedEffective.add(`${o.metadata.namespace}/${o.metadata.name}`);
        this.queue.add('sync');
      },
    );
    this.informers.push(effective);
    return effective;
  }

  /** The writer of EffectivePolicies and the policies' conditions. */
  private newPublisher(): NetworkPublisher {
    return new NetworkPublisher({
      client: this.client,
      name: this.name,
      effective: this.effective,
      policyInformers: this.policyInformers,
      ledger: this.ledger,
      writes: this.writes,
      skipped: this.skipped,
      log: this.log,
    });
  }

  /** Namespaces whose label sets are capped, reported as Warning Events. */
  private newCappedReport(): CappedNamespaceReport {
    return new CappedNamespaceReport({
      metrics: this.metrics,
      log: this.log,
      post: (obj, reason, message) => {
        this.writes.inc();
        return postWarningEvent(this.client, obj, reason, message, { component: this.name });
      },
    });
  }

  /** Process metrics and the published count; a failing list/watch logged once, pending work run after. */
  private observe(): void {
    this.metrics.processMetrics();
    this.metrics.gauge(
      'cascade_netpol_effective_policies',
      'EffectivePolicies of kind Network published',
      () => this.state.effectives.size,
    );
    watchHealth(this.informers, this.metrics, this.log, '/readyz fails meanwhile', () => {
      this.queue.add('slices');
      this.queue.add('sync');
    });
  }

  get leader(): boolean {
    return this.elector.leader;
  }

  get ready(): boolean {
    return this.started && this.informers.every((i) => i.synced && i.failing === undefined);
  }

  async start(): Promise<void> {
    const ready = () => this.ready;
    if (this.opts.metricsPort !== undefined)
      this.servers.push(await this.metrics.serve(this.opts.metricsPort, ready));
    if (this.opts.metricsBindAddress)
      this.servers.push(await this.metrics.serveOn(this.opts.metricsBindAddress, ready, 'metrics'));
    if (this.opts.healthProbeBindAddress)
      this.servers.push(await this.metrics.serveOn(this.opts.healthProbeBindAddress, ready, 'probes'));
    await this.publisher.seedReported();
    await this.relay.seedPosted();
    await startInformers(this.informers);
    this.started = true;
    this.elector.start();
    this.queue.add('slices');
    this.queue.add('sync');
    this.resync = setInterval(
      () => {
        this.slices?.resync();
        this.full = true;
        this.queue.add('slices');
        this.queue.add('sync');
      },
      (this.opts.resyncSeconds ?? 600) * 1000,
    );
    this.resync.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.resync);
    clearTimeout(this.analysisTimer);
    clearTimeout(this.sliceTimer);
    for (const i of this.informers) i.stop();
    this.queue.stop();
    await this.queue.drain();
    await this.elector.release();
    await Promise.all(this.servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
  }

  /** Resolves when no reconcile is pending or running. */
  async idle(): Promise<void> {
    // a batch of pod changes waiting for its period is pending work too
    while (this.sliceTimer) await new Promise((r) => setTimeout(r, 20));
    await this.queue.drain();
  }

  /** A slice pass for pod changes: at once, or after the batch period (one timer for a batch). */
  private slicesSoon(): void {
    const ms = this.opts.sliceBatchMillis ?? 0;
    if (ms <= 0) {
      this.queue.add('slices');
      return;
    }
    if (this.sliceTimer) return;
    this.sliceTimer = setTimeout(() => {
      this.sliceTimer = undefined;
      this.queue.add('slices');
    }, ms);
    this.sliceTimer.unref();
  }

  private async reconcileSlices(): Promise<void> {
    if (!this.slices || !this.started || !this.elector.leader || !this.informers.every((i) => i.synced))
      return;
    await this.slices.publish();
  }

  /** The published EffectivePolicies, for figures and tests. */
  get lastEffectives(): NetworkEffective[] {
    return [...this.state.effectives.values()];
  }

  private async reconcile(): Promise<void> {
    if (!this.started || !this.elector.leader || !this.informers.every((i) => i.synced)) return;
    this.engine.flush();
    const full = this.full;
    this.full = false;
    const all = full || this.compareAll;
    const moved = [...this.movedEffective];
    this.movedEffective.clear();
    this.compareAll = false;
    try {
      const u = this.state.update(this.engine, full);
      this.lastUpdate = u;
      if (u.analysisDueInMs !== undefined && !this.analysisTimer) {
        this.analysisTimer = setTimeout(() => {
          this.analysisTimer = undefined;
          this.queue.add('sync');
        }, u.analysisDueInMs);
        this.analysisTimer.unref();
      }
      const desired = this.state.effectives;
      // every object when the whole was recomputed; else those that moved or changed
      const keys = all || (u.effectives && !u.changed) ? undefined : [...moved, ...(u.changed ?? [])];
      this.retry(await this.publisher.effectives(desired, keys), true);
      this.retry(await this.publisher.conditions(this.state.conditions), false);
      // a Delete's target may have come or gone: the staged objects are compared again
      if (this.staged.informers.some((i) => i.cache.size)) this.queue.add('staged');
      await this.capped.update(this.engine.cappedNamespaces(), this.engine.foreignIdentityCap);
    } catch (e) {
      // the retry does it all again: a full pass if this one was, and every object compared
      if (full) this.full = true;
      this.compareAll = true;
      throw e;
    }
  }

  /** Staged policies' status (leader only): after the engine, as a Delete's target must be known. */
  private async reconcileStaged(): Promise<void> {
    if (!this.started || !this.elector.leader || !this.informers.every((i) => i.synced)) return;
    this.engine.flush();
    await this.staged.publish();
  }

  /** Agents' findings as Events (leader only); a failed Event is tried again after 5 s. */
  private async relayReports(): Promise<void> {
    if (!this.started || !this.elector.leader || !this.reports.synced) return;
    if ((await this.relay.relay()) > 0) setTimeout(() => this.queue.add('reports'), 5000).unref();
    // the reports carry the staged-flow counts of the staged objects' status
    if (this.staged.informers.some((i) => i.cache.size)) this.queue.add('staged');
  }

  /**
   * Transient failures are tried again after their backoff (EffectivePolicies by key; conditions
   * are compared on every pass); refusals wait for their input to change or the next resync.
   */
  private retry(failed: Failed, effective: boolean): void {
    let delay = Number.POSITIVE_INFINITY;
    for (const { item, failure } of failed) {
      if (failure.permanent) continue;
      if (effective) this.retryEffective.add(item);
      delay = Math.min(delay, PublishLedger.backoffMs(failure));
    }
    if (delay === Number.POSITIVE_INFINITY) return;
    setTimeout(() => {
      for (const k of this.retryEffective) this.movedEffective.add(k);
      this.retryEffective.clear();
      this.queue.add('sync');
    }, delay).unref();
  }
}
