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
import { hostname } from 'node:os';
import {
  type BindAddress,
  EFFECTIVE_GROUP,
  Informer,
  jsonLogger,
  type KubeClient,
  type KubeObject,
  LeaderElector,
  type Logger,
  leaderMetrics,
  leaseHealth,
  MANAGED_BY,
  Metrics,
  postWarningEvent,
  startInformers,
  WorkQueue,
  watchHealth,
} from '@cascade/core';
import { isEqual } from 'lodash-es';
import { agentInformers, POLICY_PATHS } from './agent-watch.ts';
import { NetpolEngine } from './engine.ts';
import { AddressOwners } from './owners.ts';
import { type NetworkEffective, networkEffectiveSpec, type PolicyCondition } from './published.ts';
import { DEFAULT_ANALYSIS_INTERVAL_MS, PublishedState, type PublishedUpdate } from './published-state.ts';
import { SlicePublisher } from './slice-publisher.ts';

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
}

const EP_PATH = `/apis/${EFFECTIVE_GROUP}/v1alpha1`;
const STATUS_KINDS = new Map<string, string>(
  POLICY_PATHS.filter(([, , cluster]) => cluster).map(([k, p]) => [k as string, p]),
);
const API_VERSION: Record<string, string> = {
  NetworkPolicy: 'networking.k8s.io/v1',
  AdminNetworkPolicy: 'policy.networking.k8s.io/v1alpha1',
  BaselineAdminNetworkPolicy: 'policy.networking.k8s.io/v1alpha1',
  ClusterNetworkPolicy: 'policy.networking.k8s.io/v1alpha2',
};

export class NetpolController {
  readonly engine = new NetpolEngine();
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
  private readonly informers: Informer[];
  private readonly effective: Informer;
  private readonly owners = new AddressOwners();
  readonly slices?: SlicePublisher;
  private readonly policyInformers = new Map<string, Informer>();
  private readonly queue: WorkQueue;
  private readonly elector: LeaderElector;
  private readonly opts: NetpolControllerOptions;
  /** NetworkPolicy problems already reported as Events (policy key -> message), seeded at start. */
  private readonly reported = new Map<string, string>();
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
  private analysisTimer?: NodeJS.Timeout;
  /** The last update, for tests and figures. */
  lastUpdate?: PublishedUpdate;

  constructor(opts: NetpolControllerOptions) {
    this.opts = opts;
    this.name = opts.name ?? 'netpolicy-controller';
    this.client = opts.client;
    this.log = opts.log ?? jsonLogger(this.name);
    this.state = new PublishedState({
      analysisIntervalMs: (opts.analysisIntervalSeconds ?? DEFAULT_ANALYSIS_INTERVAL_MS / 1000) * 1000,
      ...(opts.entryBudget ? { entryBudget: opts.entryBudget } : {}),
    });
    // two keys: 'slices' (cheap, latency matters to enforcement) and 'sync' (EffectivePolicies, status)
    this.queue = new WorkQueue((k) => (k === 'slices' ? this.reconcileSlices() : this.reconcile()), 2, {
      registry: this.metrics,
      name: this.name,
    });
    this.queue.onError = (_k, e) => {
      this.errors.inc();
      this.log('warn', 'reconcile failed, retrying', { error: String(e) });
    };
    const changed = () => this.queue.add('sync');
    this.informers = agentInformers({
      client: this.client,
      engine: this.engine,
      owners: this.owners,
      refusedPolicies: new Map(),
      log: this.log,
      changed,
      ownersChanged: () => {},
      podChanged: (key) => {
        if (!this.slices) return;
        this.slices.touch(key);
        this.queue.add('slices');
      },
    });
    if (opts.publishSlices !== false) {
      this.slices = new SlicePublisher({
        client: this.client,
        name: this.name,
        namespace: opts.leaseNamespace ?? 'default',
        owners: this.owners,
        changed: () => this.queue.add('slices'),
        writes: this.sliceWrites,
        skipped: this.skipped,
      });
      this.informers.push(this.slices.informer);
      this.metrics.gauge(
        'cascade_netpol_pod_address_slices',
        'PodAddressSlices published',
        () => this.slices?.size ?? 0,
      );
    }
    for (const inf of this.informers)
      for (const [kind, path] of POLICY_PATHS) if (inf.path === path) this.policyInformers.set(kind, inf);
    this.effective = new Informer(
      this.client,
      `${EP_PATH}/effectivepolicies?labelSelector=${encodeURIComponent(`${MANAGED_BY}=${this.name}`)}`,
      (_t, o) => {
        this.movedEffective.add(`${o.metadata.namespace}/${o.metadata.name}`);
        this.queue.add('sync');
      },
    );
    this.informers.push(this.effective);
    this.metrics.processMetrics();
    this.metrics.gauge(
      'cascade_netpol_effective_policies',
      'EffectivePolicies of kind Network published',
      () => this.state.effectives.size,
    );
    // a list/watch failing is logged once and counted; /readyz fails meanwhile; pending work runs after
    watchHealth(this.informers, this.metrics, this.log, '/readyz fails meanwhile', () => {
      this.queue.add('slices');
      this.queue.add('sync');
    });
    const { leaseErrors, transitions } = leaderMetrics(this.metrics, `${this.name}-leader`, () =>
      Boolean(this.elector?.leader),
    );
    this.elector = new LeaderElector(
      this.client,
      opts.leaseNamespace ?? 'default',
      `${this.name}-leader`,
      opts.identity ?? `${hostname()}-${process.pid}`,
      opts.leaseDurationSeconds ?? 15,
      (leader) => {
        transitions.inc();
        this.log('info', leader ? 'became leader' : 'lost leadership');
        if (leader) {
          this.slices?.resync(); // another leader may have written since
          this.full = true;
          this.queue.add('slices');
          this.queue.add('sync');
        }
      },
    );
    leaseHealth(this.elector, leaseErrors, this.log);
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
    await this.seedReported();
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
    for (const i of this.informers) i.stop();
    this.queue.stop();
    await this.queue.drain();
    await this.elector.release();
    await Promise.all(this.servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
  }

  /** Resolves when no reconcile is pending or running. */
  async idle(): Promise<void> {
    await this.queue.drain();
  }

  /** The Events this controller posted before (a restart does not post them again). */
  private async seedReported(): Promise<void> {
    try {
      const r = await this.client.request<{ items: KubeObject[] }>(
        'GET',
        `/api/v1/events?fieldSelector=${encodeURIComponent(`source=${this.name}`)}`,
      );
      for (const e of r.items) {
        const o = e as unknown as { involvedObject: { namespace: string; name: string }; message: string };
        this.reported.set(`NetworkPolicy/${o.involvedObject.namespace}/${o.involvedObject.name}`, o.message);
      }
    } catch (e) {
      this.log('warn', 'cannot list earlier Events: problems may be reported again', { error: String(e) });
    }
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
      await this.publishEffective(all || u.effectives ? undefined : moved);
      await this.publishStatus();
    } catch (e) {
      // the retry does it all again: a full pass if this one was, and every object compared
      if (full) this.full = true;
      this.compareAll = true;
      throw e;
    }
  }

  /** Makes the live EffectivePolicies match the desired ones: `keys` only, or all (undefined). */
  private async publishEffective(keys: string[] | undefined): Promise<void> {
    const desired = this.state.effectives;
    const labels = { [MANAGED_BY]: this.name, 'cascade.dev/policy-kind': 'network' };
    for (const key of keys ?? desired.keys()) {
      const e = desired.get(key);
      if (!e) continue;
      const spec = networkEffectiveSpec(e);
      const live = this.effective.cache.get(key);
      if (live && isEqual(live.spec, spec) && isEqual(live.metadata.labels ?? {}, labels)) {
        this.skipped.inc();
        continue;
      }
      const obj = {
        apiVersion: `${EFFECTIVE_GROUP}/v1alpha1`,
        kind: 'EffectivePolicy',
        metadata: { name: e.name, namespace: e.namespace, labels },
        spec,
      };
      this.writes.inc();
      const applied = await this.client.apply(
        `${EP_PATH}/namespaces/${encodeURIComponent(e.namespace)}/effectivepolicies/${e.name}`,
        obj,
        this.name,
      );
      this.effective.cache.set(key, applied);
    }
    const orphans = keys
      ? keys.flatMap((k) => {
          const live = this.effective.cache.get(k);
          return live ? [[k, live] as const] : [];
        })
      : [...this.effective.cache];
    for (const [key, live] of orphans) {
      if (desired.has(key)) continue;
      this.writes.inc();
      await this.client
        .request(
          'DELETE',
          `${EP_PATH}/namespaces/${encodeURIComponent(live.metadata.namespace ?? '')}/effectivepolicies/${live.metadata.name}`,
        )
        .catch((e: { status?: number }) => {
          if (e.status !== 404) throw e;
        });
      this.effective.cache.delete(key);
    }
  }

  /** Conditions where they differ from the live ones (a compare per policy: cheap). */
  private async publishStatus(): Promise<void> {
    for (const [key, conds] of this.state.conditions) {
      const [kind, ...rest] = key.split('/');
      const name = rest.pop()!;
      const namespace = rest[0];
      if (kind === 'NetworkPolicy') {
        const bad = conds.filter(
          (c) => (c.type === 'Accepted' || c.type === 'RulesEffective') && c.status === 'False',
        );
        const message = bad.map((c) => `${c.reason}: ${c.message}`).join('; ');
        if (!message || this.reported.get(key) === message) continue;
        this.reported.set(key, message);
        this.writes.inc();
        await postWarningEvent(
          this.client,
          { apiVersion: API_VERSION[kind]!, kind, namespace: namespace!, name },
          bad[0]!.reason,
          message,
          { component: this.name },
        ).catch((e) => this.log('warn', 'cannot post an Event', { policy: key, error: String(e) }));
        continue;
      }
      const inf = this.policyInformers.get(kind!);
      const live = inf?.cache.get(name);
      if (!live || !STATUS_KINDS.has(kind!)) continue;
      const old =
        (live.status as { conditions?: (PolicyCondition & { lastTransitionTime?: string })[] })?.conditions ??
        [];
      const now = new Date().toISOString();
      const next = conds.map((c) => {
        const prev = old.find((o) => o.type === c.type);
        return {
          ...c,
          lastTransitionTime:
            prev && prev.status === c.status && prev.lastTransitionTime ? prev.lastTransitionTime : now,
          observedGeneration: live.metadata.generation ?? 0,
        };
      });
      const same =
        old.length === next.length &&
        next.every((c) => {
          const o = old.find((x) => x.type === c.type) as (typeof next)[number] | undefined;
          return (
            o &&
            o.status === c.status &&
            o.reason === c.reason &&
            o.message === c.message &&
            (o as { observedGeneration?: number }).observedGeneration === c.observedGeneration
          );
        });
      if (same) {
        this.skipped.inc();
        continue;
      }
      this.writes.inc();
      const applied = await this.client.apply(
        `${STATUS_KINDS.get(kind!)!}/${encodeURIComponent(name)}/status`,
        { apiVersion: API_VERSION[kind!], kind, metadata: { name }, status: { conditions: next } },
        this.name,
      );
      inf!.cache.set(name, applied);
    }
  }
}
