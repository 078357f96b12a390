// The policy controller for one kind: informers feed the engine; a reconcile in two lanes publishes
// by server-side apply, and only when the desired content differs from the live object (steady state:
// zero writes). Lane `sync`: flush the engine, EffectivePolicies, policy status. Lane `downstream`:
// what the kind renders (Limitador ConfigMaps, Authorino AuthConfigs) and <Kind>Affected on targets.
// Only the lease holder writes.
//
// The reconcile is incremental: the engine's FlushReport names the paths and policies a change can
// affect, so only those routes' EffectivePolicies, those policies' statuses, those gateways'
// renderings and those targets' conditions are recomputed and compared. A full pass (every object,
// orphans included) runs on start, on gaining the lease and on every resync interval. Work that
// failed stays pending and is retried with backoff.

import type { Server } from 'node:http';
import { hostname } from 'node:os';
import { SpanStatusCode } from '@opentelemetry/api';
import { isEqual } from 'lodash-es';
import { EFFECTIVE_GROUP, MANAGED_BY } from '../effective/effective-policy.ts';
import type { PolicyKind } from '../kind.ts';
import { PolicyEngine } from '../merge/engine.ts';
import { type Condition, policyConditions } from '../status/conditions.ts';
import { convertTopology } from '../topology/from-k8s.ts';
import { routeKey } from '../topology/types.ts';
import { AffectedWriter } from './affected.ts';
import type { KubeClient, KubeObject } from './client.ts';
import { EffectivePublisher } from './effective-writer.ts';
import { postWarningEvent } from './events.ts';
import { Informer, type InformerEvent, startInformers } from './informer.ts';
import { LeaderElector } from './leader.ts';
import { type BindAddress, jsonLogger, type Logger, Metrics } from './metrics.ts';
import { type PublishFailure, PublishLedger, withConsumerReadiness, withPublishFailures } from './publish.ts';
import { WorkQueue } from './queue.ts';
import { RenderedPublisher } from './rendered.ts';
import { tracer } from './tracing.ts';

export interface ControllerOptions {
  client: KubeClient;
  kind: PolicyKind;
  /** Field manager and EffectivePolicy owner label. */
  name: string;
  leaseNamespace?: string;
  leaseDurationSeconds?: number;
  identity?: string;
  /** Serves /metrics, /healthz and /readyz on 127.0.0.1 at this port (tests; 0 picks a free one). */
  metricsPort?: number;
  /** controller-runtime's --metrics-bind-address: /metrics there (undefined: not served). */
  metricsBindAddress?: BindAddress;
  /** controller-runtime's --health-probe-bind-address: /healthz and /readyz there. */
  healthProbeBindAddress?: BindAddress;
  log?: Logger;
  /** Full reconcile (every object compared, orphans collected) at least this often. Default 600. */
  resyncSeconds?: number;
  /** API writes in flight at once within a reconcile. Default 8. */
  writeConcurrency?: number;
  /** Settings for the kind (e.g. limitadorNamespace): see RenderedResource.namespaceSetting. */
  settings?: Readonly<Record<string, string>>;
}

/** Runs `f` over `items` with at most `n` in flight; the first failure stops new work and is thrown. */
export async function eachLimit<T>(items: Iterable<T>, n: number, f: (x: T) => Promise<void>): Promise<void> {
  const it = items[Symbol.iterator]();
  let failed: { e: unknown } | undefined;
  const worker = async () => {
    for (let next = it.next(); !next.done && !failed; next = it.next()) {
      try {
        await f(next.value);
      } catch (e) {
        failed ??= { e };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, n) }, worker));
  if (failed) throw failed.e;
}

const GW = '/apis/gateway.networking.k8s.io/v1';

/** A lane's pending work for this pass, emptied (undefined for a full pass: everything is looked at). */
function take<T>(pending: Set<T>, full: boolean): T[] | undefined {
  const items = full ? undefined : [...pending];
  pending.clear();
  return items;
}

/** Pending work back after a failed pass, for the retry. */
function putBack<T>(pending: Set<T>, items: T[] | undefined): void {
  for (const i of items ?? []) pending.add(i);
}

export class PolicyController {
  readonly engine: PolicyEngine;
  readonly metrics = new Metrics();
  readonly writes = this.metrics.counter(
    'cascade_writes_issued_total',
    'API writes issued (apply, status, delete)',
  );
  readonly skipped = this.metrics.counter(
    'cascade_writes_skipped_total',
    'Writes skipped because the live object already matched',
  );
  private readonly errors = this.metrics.counter('cascade_reconcile_errors_total', 'Failed reconciles');
  private readonly reconciles = this.metrics.counterVec(
    'cascade_reconciles_total',
    'Reconciles by lane and outcome (full, incremental, not-leader, not-ready, error)',
    ['lane', 'outcome'],
  );
  private readonly latency = this.metrics.histogram('cascade_reconcile_seconds', 'Reconcile latency');
  private readonly informers: Informer[] = [];
  private readonly effective: Informer;
  private readonly policies: Informer;
  private readonly queue: WorkQueue;
  private readonly elector: LeaderElector;
  private readonly opts: ControllerOptions;
  private readonly log: Logger;
  private readonly servers: Server[] = [];
  private started = false;
  /** Next reconcile compares everything (start, new leader, periodic resync). */
  private full = true;
  private resyncTimer?: NodeJS.Timeout;
  private readonly pendingRoutes = new Set<string>();
  private readonly pendingPolicies = new Set<string>();
  private readonly pendingEffective = new Set<string>();
  /** The downstream lane's full pass (start, new leader, resync). */
  private downstreamFull = true;
  /** Policies whose targets' Affected conditions must be re-checked. */
  private readonly pendingAffected = new Set<string>();
  /** Gateways (ns/name) whose rendered objects must be recomputed. */
  private readonly pendingGateways = new Set<string>();
  /** Rendered objects (renderedKey) changed by someone else: re-check. */
  private readonly pendingRendered = new Set<string>();
  private readonly grants: Informer;
  /** apiVersion/kind -> informer of the rendered objects we manage of that resource. */
  private readonly renderInformers = new Map<
    string,
    {
      informer: Informer;
      base: string;
      plural: string;
      ready?: (live: { status?: unknown }) => boolean | undefined;
    }
  >();
  /** Policy id -> the object keys (without section) it targeted when last reconciled. */
  private readonly policyTargets = new Map<string, string[]>();
  /** Topology object -> uid|generation|labels last applied to the engine. */
  private readonly topologySeen = new Map<string, string>();
  readonly reconcileStats = { full: 0, incremental: 0, lastRoutes: 0, lastPolicies: 0 };
  private readonly affected: AffectedWriter;
  private readonly renderer: RenderedPublisher;
  private readonly effectivePublisher: EffectivePublisher;
  /** Objects whose last write failed, with the policies they carry (their status says so). */
  readonly ledger = new PublishLedger(this.metrics);
  private get writeConcurrency(): number {
    return this.opts.writeConcurrency ?? 8;
  }

  constructor(opts: ControllerOptions) {
    this.opts = opts;
    this.log = opts.log ?? jsonLogger(opts.name);
    this.engine = new PolicyEngine(opts.kind);
    // Two lanes: `sync` (flush, EffectivePolicies, policy status) and `downstream` (rendered objects,
    // <Kind>Affected on targets), so re-rendering a large gateway never delays an EffectivePolicy.
    this.queue = new WorkQueue((key) => this.reconcile(key), 2, { registry: this.metrics, name: opts.name });
    this.queue.onError = (_k, e) => {
      this.errors.inc();
      this.log('warn', 'reconcile failed, retrying', { error: String(e) });
    };
    const c = opts.client;
    const topo = (type: InformerEvent, o: KubeObject, kind: string) => {
      // Status-only updates (ours: <Kind>Affected; the gateway's own) change neither the spec
      // (generation) nor labels nor uid: nothing to recompute.
      const id = `${kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
      const sig = `${o.metadata.uid}|${o.metadata.generation ?? ''}|${JSON.stringify(o.metadata.labels ?? {})}`;
      if (type === 'DELETED') this.topologySeen.delete(id);
      else if (this.topologySeen.get(id) === sig) return;
      else this.topologySeen.set(id, sig);
      const m = { kind, metadata: o.metadata, spec: o.spec };
      const conv = convertTopology(m);
      if (type === 'DELETED') {
        if (kind === 'Gateway') this.engine.removeGateway(o.metadata.namespace ?? 'default', o.metadata.name);
        else if (kind === 'GatewayClass') this.engine.removeGatewayClass(o.metadata.name);
        else if (kind === 'HTTPRoute' || kind === 'GRPCRoute')
          this.engine.removeRoute(kind, o.metadata.namespace ?? 'default', o.metadata.name);
      } else if (conv && !('error' in conv)) {
        if (conv.kind === 'Gateway') this.engine.upsertGateway(conv.value);
        else if (conv.kind === 'GatewayClass') this.engine.upsertGatewayClass(conv.value);
        else if (conv.kind === 'Route') this.engine.upsertRoute(conv.value);
        else this.engine.upsertNamespace(conv.value);
      } else if (conv)
        this.log('warn', 'ignoring invalid object', {
          kind,
          name: o.metadata.name,
          error: (conv as { error: string }).error,
        });
      // A route event always re-checks its EffectivePolicy (a new uid must reach the owner reference)
      // and the rendering of its gateways (hostnames); a gateway event its rendering.
      if (kind === 'HTTPRoute' || kind === 'GRPCRoute') {
        const rk = routeKey(kind, o.metadata.namespace ?? 'default', o.metadata.name);
        this.pendingRoutes.add(rk);
        for (const pk of this.engine.topology.routePathKeys(rk)) this.pendingGateways.add(gatewayOfPath(pk));
      } else if (kind === 'Gateway')
        this.pendingGateways.add(`${o.metadata.namespace ?? 'default'}/${o.metadata.name}`);
      this.queue.add('sync');
    };
    for (const [path, kind] of [
      [`${GW}/gatewayclasses`, 'GatewayClass'],
      [`${GW}/gateways`, 'Gateway'],
      [`${GW}/httproutes`, 'HTTPRoute'],
      [`${GW}/grpcroutes`, 'GRPCRoute'],
      ['/api/v1/namespaces', 'Namespace'],
    ] as const) {
      this.informers.push(new Informer(c, path, (t, o) => topo(t, o, kind)));
    }
    const k = opts.kind;
    this.policies = new Informer(c, `/apis/${k.group}/${k.version}/${k.plural}`, (type, o) => {
      if (type === 'DELETED')
        this.engine.removePolicy(k.kind, o.metadata.namespace ?? 'default', o.metadata.name);
      else
        this.engine.upsertPolicy({
          apiVersion: o.apiVersion,
          kind: k.kind,
          metadata: { ...o.metadata, namespace: o.metadata.namespace ?? 'default' },
          spec: o.spec,
        } as never);
      // Status carries observedGeneration: every event re-checks this policy's status.
      this.pendingPolicies.add(`${k.kind}:${o.metadata.namespace ?? 'default'}/${o.metadata.name}`);
      this.queue.add('sync');
    });
    this.grants = new Informer(
      c,
      '/apis/gateway.networking.k8s.io/v1beta1/referencegrants',
      () => {
        // A grant can change any gateway's rendering (cross-namespace references).
        for (const gw of this.engine.topology.gateways.values())
          this.pendingGateways.add(`${gw.namespace}/${gw.name}`);
        this.queue.add('sync');
      },
      undefined,
      true,
    );
    this.informers.push(this.grants);
    for (const r of opts.kind.renders ?? []) {
      const base = r.group === '' ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`;
      const apiVersion = r.group === '' ? r.version : `${r.group}/${r.version}`;
      // confined to one namespace by a setting: listed and watched there only (a Role there suffices)
      const confined = r.namespaceSetting ? opts.settings?.[r.namespaceSetting] : undefined;
      const informer = new Informer(
        c,
        `${base}/${confined ? `namespaces/${confined}/` : ''}${r.plural}?labelSelector=${encodeURIComponent(`${MANAGED_BY}=${opts.name}`)}`,
        (_t, o) => {
          this.pendingRendered.add(`${apiVersion}/${r.kind}/${o.metadata.namespace}/${o.metadata.name}`);
          this.queue.add('sync');
        },
        undefined,
        true,
      );
      this.renderInformers.set(`${apiVersion}/${r.kind}`, {
        informer,
        base,
        plural: r.plural,
        ...(r.ready ? { ready: r.ready } : {}),
      });
      this.informers.push(informer);
    }
    this.effective = new Informer(
      c,
      `/apis/${EFFECTIVE_GROUP}/v1alpha1/effectivepolicies?labelSelector=${encodeURIComponent(`${MANAGED_BY}=${opts.name}`)}`,
      (_t, o) => {
        this.pendingEffective.add(`${o.metadata.namespace}/${o.metadata.name}`);
        this.queue.add('sync');
      },
    );
    this.informers.push(this.policies, this.effective);
    this.ledger.onChange = (object, failure, policies) => {
      if (failure) {
        this.log('warn', 'publish failed: the object is retried on its own, the others go on', {
          object,
          status: failure.status,
          error: failure.message,
          policies,
        });
        for (const id of policies.slice(0, 10))
          this.policyEvent(id, 'PublishFailed', `could not publish ${object}: ${failure.message}`);
      } else this.log('info', 'published after failing', { object });
      // the Enforced condition of the policies it carries changes
      for (const id of policies) this.pendingPolicies.add(id);
      if (policies.length) this.queue.add('sync');
    };
    this.effectivePublisher = new EffectivePublisher({
      engine: this.engine,
      client: c,
      kind: opts.kind,
      name: opts.name,
      effective: this.effective,
      ledger: this.ledger,
      writes: this.writes,
      skipped: this.skipped,
      writeConcurrency: this.writeConcurrency,
      uidOf: (path, ns, name) => this.uidOf(path, ns, name),
    });
    this.renderer = new RenderedPublisher({
      engine: this.engine,
      client: c,
      kind: opts.kind,
      name: opts.name,
      renderInformers: this.renderInformers,
      grants: this.grants,
      ledger: this.ledger,
      writes: this.writes,
      skipped: this.skipped,
      log: this.log,
      writeConcurrency: this.writeConcurrency,
      uidOf: (path, ns, name) => this.uidOf(path, ns, name),
      settings: opts.settings ?? {},
    });
    this.renderer.onStatusMoved = (policies) => {
      for (const id of policies) this.pendingPolicies.add(id);
      this.queue.add('sync');
    };
    this.affected = new AffectedWriter({
      engine: this.engine,
      client: c,
      name: opts.name,
      informers: this.informers,
      writes: this.writes,
      skipped: this.skipped,
    });
    this.metrics.gauge('cascade_queue_depth', 'Keys waiting for a reconcile', () => this.queue.depth);
    this.metrics.processMetrics();
    // policies by condition, as alerts want them: cascade_policies{kind,condition,status,reason}
    this.metrics.family(
      'cascade_policies',
      'Policies of the kind by status condition',
      ['kind', 'condition', 'status', 'reason'],
      () => {
        const counts = new Map<string, [Record<string, string>, number]>();
        for (const o of this.policies.cache.values())
          for (const cnd of (o.status as { conditions?: Condition[] } | undefined)?.conditions ?? []) {
            const labels = {
              kind: opts.kind.kind,
              condition: cnd.type,
              status: cnd.status,
              reason: cnd.reason,
            };
            const k = JSON.stringify(labels);
            const v = counts.get(k);
            if (v) v[1]++;
            else counts.set(k, [labels, 1]);
          }
        return [...counts.values()];
      },
    );
    const watchErrors = this.metrics.counter(
      'cascade_watch_errors_total',
      'List and watch errors (the informer retries with backoff)',
    );
    for (const inf of this.informers) {
      inf.onError = () => watchErrors.inc();
      inf.onHealth = (path, error) => {
        if (error) {
          this.log('warn', 'list/watch failing: retrying with backoff; /readyz fails meanwhile', {
            path,
            error,
          });
          return;
        }
        this.log('info', 'list/watch recovered', { path });
        // reconciles found the controller not ready meanwhile and left their work pending: run it
        this.queue.add('sync');
        this.queue.add('downstream');
      };
    }
    const leaseErrors = this.metrics.counter('cascade_lease_errors_total', 'Lease acquire/renew errors');
    const transitions = this.metrics.counter(
      'cascade_leader_transitions_total',
      'Times this replica became or stopped being the leader',
    );
    this.metrics.gauge('cascade_leader', '1 while this replica holds the lease', () =>
      this.elector?.leader ? 1 : 0,
    );
    // client-go's name for the same, which leader-election alerts use
    this.metrics.family(
      'leader_election_master_status',
      '1 while this replica is the leader of the lease',
      ['name'],
      () => [[{ name: `${opts.name}-leader` }, this.elector?.leader ? 1 : 0]],
    );
    this.elector = new LeaderElector(
      c,
      opts.leaseNamespace ?? 'default',
      `${opts.name}-leader`,
      opts.identity ?? `${hostname()}-${process.pid}`,
      opts.leaseDurationSeconds ?? 15,
      (leader) => {
        transitions.inc();
        this.log('info', leader ? 'became leader' : 'lost leadership');
        if (leader) {
          this.full = true;
          this.downstreamFull = true;
          this.queue.add('sync');
        }
      },
    );
    this.elector.onError = (error) => {
      if (error) {
        leaseErrors.inc();
        this.log('warn', 'lease acquire/renew failing: not leading until it succeeds', { error });
      } else this.log('info', 'lease acquire/renew recovered');
    };
  }

  /** Ready: every informer has listed and none is failing (an unreachable API server fails it). */
  get ready(): boolean {
    return this.started && this.informers.every((i) => i.synced && i.failing === undefined);
  }

  get leader(): boolean {
    return this.elector.leader;
  }

  async start(): Promise<void> {
    const synced = startInformers(this.informers);
    if (this.opts.metricsPort !== undefined)
      this.servers.push(await this.metrics.serve(this.opts.metricsPort, () => this.ready));
    if (this.opts.metricsBindAddress)
      this.servers.push(
        await this.metrics.serveOn(this.opts.metricsBindAddress, () => this.ready, 'metrics'),
      );
    if (this.opts.healthProbeBindAddress)
      this.servers.push(
        await this.metrics.serveOn(this.opts.healthProbeBindAddress, () => this.ready, 'probes'),
      );
    await synced;
    this.started = true;
    this.resyncTimer = setInterval(
      () => {
        this.full = true;
        this.downstreamFull = true;
        this.queue.add('sync');
      },
      (this.opts.resyncSeconds ?? 600) * 1000,
    );
    this.resyncTimer.unref();
    this.elector.start();
    this.log('info', 'caches synced', { kind: this.opts.kind.kind });
  }

  /** Graceful stop: no new work, finish in-flight reconciles, release the lease. */
  async stop(opts: { releaseLease?: boolean } = {}): Promise<void> {
    for (const i of this.informers) i.stop();
    clearInterval(this.resyncTimer);
    this.queue.stop();
    await this.queue.drain();
    // releaseLease false: leave as a killed process would (the lease expires on its own).
    if (opts.releaseLease === false) this.elector.abandon();
    else await this.elector.release();
    await Promise.all(this.servers.map((srv) => new Promise((r) => srv.close(r))));
  }

  /** Next reconcile compares every object (what the periodic resync does). */
  resyncNow(): void {
    this.full = true;
    this.downstreamFull = true;
    this.queue.add('sync');
  }

  /** Waits until nothing is queued or running (tests). */
  async idle(): Promise<void> {
    await this.queue.drain();
  }

  /** One span per reconcile: kind, key, full or incremental, what it looked at, what it wrote, outcome. */
  private reconcile(key: string): Promise<void> {
    return tracer().startActiveSpan(
      'reconcile',
      {
        attributes: {
          'cascade.kind': this.opts.kind.kind,
          'cascade.key': key,
          'cascade.controller': this.opts.name,
        },
      },
      async (span) => {
        const writes = this.writes.get();
        const skipped = this.skipped.get();
        try {
          const outcome =
            key === 'downstream' ? await this.reconcileDownstream() : await this.reconcileOnce();
          this.reconciles.inc({ lane: key, outcome });
          span.setAttributes({
            'cascade.outcome': outcome,
            'cascade.full': outcome === 'full',
            'cascade.routes': this.reconcileStats.lastRoutes,
            'cascade.policies': this.reconcileStats.lastPolicies,
            'cascade.writes': this.writes.get() - writes,
            'cascade.writes_skipped': this.skipped.get() - skipped,
          });
        } catch (e) {
          this.reconciles.inc({ lane: key, outcome: 'error' });
          span.setAttributes({ 'cascade.outcome': 'error', 'cascade.writes': this.writes.get() - writes });
          span.recordException(e as Error);
          span.setStatus({ code: SpanStatusCode.ERROR, message: String(e) });
          throw e;
        } finally {
          span.end();
        }
      },
    );
  }

  private async reconcileOnce(): Promise<'not-ready' | 'not-leader' | 'full' | 'incremental'> {
    if (!this.ready) return 'not-ready';
    if (!this.elector.leader) return 'not-leader';
    const t0 = process.hrtime.bigint();
    // Pending sets survive a failed reconcile: the retry does the same work again.
    const report = this.engine.flush();
    for (const pk of [...report.changed, ...report.removed]) {
      const bar = pk.indexOf('|');
      const hash = pk.indexOf('#', bar);
      this.pendingRoutes.add(pk.slice(bar + 1, hash < 0 ? undefined : hash));
      this.pendingGateways.add(gatewayOfPath(pk));
    }
    for (const id of report.policies) this.pendingPolicies.add(id);
    const full = this.full;
    this.full = false;
    try {
      const routes = take(this.pendingRoutes, full);
      const policies = take(this.pendingPolicies, full);
      const effective = take(this.pendingEffective, full);
      // What the downstream lane must look at after this flush.
      if (full) this.downstreamFull = true;
      else for (const p of policies ?? []) this.pendingAffected.add(p);
      this.queue.add('downstream');
      try {
        this.retry(
          await this.effectivePublisher.publish(routes, effective),
          (key) => this.pendingEffective.add(key),
          'sync',
        );
        await this.publishStatus(policies);
      } catch (e) {
        // Keep what was not done for the retry (conservatively: all of it).
        if (full) this.full = true;
        putBack(this.pendingRoutes, routes);
        putBack(this.pendingPolicies, policies);
        putBack(this.pendingEffective, effective);
        throw e;
      }
      if (full) this.reconcileStats.full++;
      else this.reconcileStats.incremental++;
      this.reconcileStats.lastRoutes = routes?.length ?? -1;
      this.reconcileStats.lastPolicies = policies?.length ?? -1;
      return full ? 'full' : 'incremental';
    } finally {
      this.latency.observe(Number(process.hrtime.bigint() - t0) / 1e9);
    }
  }

  /** The downstream lane: rendered objects and Affected conditions of what the sync lane flushed. */
  private async reconcileDownstream(): Promise<'not-ready' | 'not-leader' | 'full' | 'incremental'> {
    if (!this.ready) return 'not-ready';
    if (!this.elector.leader) return 'not-leader';
    const full = this.downstreamFull;
    this.downstreamFull = false;
    const gateways = take(this.pendingGateways, full);
    const rendered = take(this.pendingRendered, full);
    const affected = take(this.pendingAffected, full);
    try {
      this.retry(
        await this.renderer.publish(gateways, rendered),
        (key) => this.pendingRendered.add(key),
        'downstream',
      );
      await this.publishAffected(affected);
    } catch (e) {
      if (full) this.downstreamFull = true;
      putBack(this.pendingGateways, gateways);
      putBack(this.pendingRendered, rendered);
      putBack(this.pendingAffected, affected);
      throw e;
    }
    return full ? 'full' : 'incremental';
  }

  private uidOf(path: string, ns: string, name: string): string | undefined {
    return this.informers.find((i) => i.path.endsWith(path))?.cache.get(`${ns}/${name}`)?.metadata.uid;
  }

  /**
   * Puts the items of transient failures back into their lane's pending set and wakes the lane after
   * the shortest backoff; refused writes wait for their input to change (or the next full pass).
   */
  private retry<T>(
    failed: { item: T; failure: PublishFailure }[],
    putBack: (item: T) => void,
    lane: string,
  ): void {
    let delay = Number.POSITIVE_INFINITY;
    for (const { item, failure } of failed) {
      if (failure.permanent) continue;
      putBack(item);
      delay = Math.min(delay, PublishLedger.backoffMs(failure));
    }
    if (delay === Number.POSITIVE_INFINITY) return;
    const t = setTimeout(() => this.queue.add(lane), delay);
    t.unref();
  }

  /** A Warning Event on a policy (best effort: the log line and the metric are the record). */
  private policyEvent(id: string, reason: string, message: string): void {
    const k = this.opts.kind;
    const [namespace, name] = id.slice(k.kind.length + 1).split('/') as [string, string];
    void postWarningEvent(
      this.opts.client,
      { apiVersion: `${k.group}/${k.version}`, kind: k.kind, namespace, name },
      reason,
      message,
      { component: this.opts.name },
    ).catch(() => undefined);
  }

  /**
   * `<Kind>Affected` on the Gateways and routes that the `ids` policies target or targeted (all
   * targets when undefined): merged into their status without touching other writers' conditions;
   * removed where no policy of the kind is attached any more.
   */
  private async publishAffected(ids: string[] | undefined): Promise<void> {
    const k = this.opts.kind;
    const targets = new Set<string>();
    const base = (key: string) => key.split('#')[0]!;
    const list = ids ?? [...new Set([...this.engine.policyIds(), ...this.policyTargets.keys()])];
    for (const id of list) {
      if (!id.startsWith(`${k.kind}:`)) continue;
      for (const t of this.policyTargets.get(id) ?? []) targets.add(t);
      const direct = (this.engine.policy(id)?.policy?.targets ?? []).map((t) => base(t.key));
      // routes below a gateway (or listener, or class) target inherit its policy: they are targets too
      const now = [...new Set(direct)];
      for (const t of direct)
        if (!/^(HTTPRoute|GRPCRoute):/.test(t))
          for (const r of this.engine.topology.routesThrough(t)) now.push(r);
      if (now.length) this.policyTargets.set(id, [...new Set(now)]);
      else this.policyTargets.delete(id);
      for (const t of now) targets.add(t);
    }
    const type = `${k.kind}Affected`;
    const nowTime = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const what = (key: string) => ({ object: `${type} on ${key}`, policies: () => [] });
    const failed = await this.ledger.each(targets, this.writeConcurrency, what, async (key) => {
      const colon = key.indexOf(':');
      const kind = key.slice(0, colon);
      const [ns, name] = key.slice(colon + 1).split('/') as [string, string];
      if (kind === 'Gateway') await this.affected.gateway(key, ns, name, type, nowTime);
      else if (kind === 'HTTPRoute' || kind === 'GRPCRoute')
        await this.affected.route(key, kind, ns, name, type, nowTime);
    });
    // the targets' policies are checked again (their other targets compare equal: no write)
    this.retry(
      failed,
      (key) => {
        for (const id of this.engine.attachedAt(key)) this.pendingAffected.add(id);
      },
      'downstream',
    );
  }

  /** Status of `ids` (policy ids; all when undefined), written only where the conditions differ. */
  private async publishStatus(ids: string[] | undefined): Promise<void> {
    const k = this.opts.kind;
    const keys =
      ids === undefined
        ? [...this.policies.cache.keys()]
        : ids.filter((id) => id.startsWith(`${k.kind}:`)).map((id) => id.slice(k.kind.length + 1));
    const what = (key: string) => ({ object: `${k.kind} ${key} status`, policies: () => [] });
    const failed = await this.ledger.each(keys, this.writeConcurrency, what, async (key) => {
      const live = this.policies.cache.get(key);
      if (!live) return; // deleted meanwhile: nothing to write
      const [ns, name] = key.split('/') as [string, string];
      const id = `${k.kind}:${ns}/${name}`;
      const liveConds =
        (live.status as { conditions?: (Condition & { lastTransitionTime?: string })[] } | undefined)
          ?.conditions ?? [];
      const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
      const conds = withConsumerReadiness(
        withPublishFailures(policyConditions(this.engine, id), [
          ...this.renderer.refusalsFor(id),
          ...this.ledger.forPolicy(id),
        ]),
        this.renderer.waitingFor(id),
      ).map((cnd) => {
        const prev = liveConds.find((x) => x.type === cnd.type);
        const same = prev && prev.status === cnd.status && prev.reason === cnd.reason;
        return {
          ...cnd,
          observedGeneration: live.metadata.generation ?? 0,
          lastTransitionTime: same && prev.lastTransitionTime ? prev.lastTransitionTime : now,
        };
      });
      const strip = (cs: unknown[]) =>
        (cs as Record<string, unknown>[]).map(({ lastTransitionTime: _t, ...rest }) => rest);
      if (isEqual(strip(liveConds), strip(conds))) {
        this.skipped.inc();
        return;
      }
      const applied = await this.opts.client.apply(
        `/apis/${k.group}/${k.version}/namespaces/${ns}/${k.plural}/${name}/status`,
        {
          apiVersion: `${k.group}/${k.version}`,
          kind: k.kind,
          metadata: { name, namespace: ns },
          status: { conditions: conds },
        },
        this.opts.name,
      );
      this.policies.cache.set(key, applied);
      this.writes.inc();
    });
    this.retry(failed, (key) => this.pendingPolicies.add(`${k.kind}:${key}`), 'sync');
  }
}

/** `Gateway:ns/name#listener|...` -> `ns/name`. */
function gatewayOfPath(pk: string): string {
  return pk.slice('Gateway:'.length, pk.indexOf('#'));
}
