// The policy controller for one kind: informers feed the engine; a reconcile in two lanes publishes
// by server-side apply, and only when the desired content differs from the live object (steady state:
// zero writes). Lane `sync`: flush the engine, EffectivePolicies, policy status. Lane `downstream`:
// what the kind renders (each enforcement component's configuration) and <Kind>Affected on targets.
// Only the lease holder writes.
//
// The reconcile is incremental: the engine's FlushReport names the paths and policies a change can
// affect, so only those routes' EffectivePolicies, those policies' statuses, those gateways'
// renderings and those targets' conditions are recomputed and compared. A full pass (every object,
// orphans included) runs on start, on gaining the lease and on every resync interval. Work that
// failed stays pending and is retried with backoff.
//
// Not here: what is watched and which work each event makes pending (controller-watches.ts), the HTTP
// endpoints (controller-metrics.ts serveEndpoints), the binary's flags and start-up (main.ts).

import type { PolicyKind } from '../kind.ts';
import { postWarningEvent } from '../kube/events.ts';
import { watchHealth } from '../kube/health.ts';
import type { Informer } from '../kube/informer.ts';
import type { LeaderElector } from '../kube/leader.ts';
import { electedLeader } from '../kube/leadership.ts';
import { jsonLogger, type Logger } from '../kube/logging.ts';
import { ControllerProcess, type ProcessOptions } from '../kube/process.ts';
import { WorkQueue } from '../kube/queue.ts';
import { inSpan } from '../kube/tracing.ts';
import { PolicyEngine } from '../merge/engine.ts';
import { AffectedWriter } from './affected.ts';
import { AggregatePublisher } from './aggregate.ts';
import type { DataPlaneGaps, DataPlaneSource } from './data-plane.ts';
import { EffectivePublisher } from './effective-writer.ts';
import { gatewayNotProgrammed } from './gateway-readiness.ts';
import { policiesByCondition } from './policy-metrics.ts';
import { PolicyStatusWriter } from './policy-status.ts';
import { logPublishChange, type PublishFailure, PublishLedger } from './publish.ts';
import { RenderedPublisher, type RenderInformer } from './rendered.ts';
import { controllerWatches } from './watches.ts';

export interface ControllerOptions extends ProcessOptions {
  kind: PolicyKind;
  /** Settings for the kind (e.g. the namespace its component reads): see RenderedResource.namespaceSetting. */
  settings?: Readonly<Record<string, string>>;
  /**
   * Enforced only where the data plane is wired: a policy of a kind that contributes data-plane
   * actions is Enforced=False (MissingDependency) while `dataPlane` says a gateway it reaches does not
   * carry it. The binaries set it (--require-wiring, default true); false where no wiring-controller
   * runs by design. True with such a kind and no `dataPlane` is refused (Enforced would be claimed
   * blind).
   */
  requireWiring?: boolean;
  /** The data plane's view (data-plane.ts), needed by requireWiring. */
  dataPlane?: DataPlaneSource;
  /**
   * Enforced means enforced (--require-ready, default true in the binaries): a policy is Enforced only
   * while every gateway it reaches is Accepted and Programmed by its controller (else
   * TargetNotProgrammed), and every object carrying its rules is served (else MissingDependency) and
   * reported ready by its consumer, which reporting nothing is not (else Pending). Tests leave it off
   * where no gateway controller or enforcement component runs.
   */
  requireReady?: boolean;
}

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

export class PolicyController extends ControllerProcess {
  readonly engine: PolicyEngine;
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
  private readonly effective: Informer;
  private readonly policies: Informer;
  protected readonly queue: WorkQueue;
  protected readonly elector: LeaderElector;
  protected readonly opts: ControllerOptions;
  protected readonly log: Logger;
  /** Next reconcile compares everything (start, new leader, periodic resync). */
  private full = true;
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
  private readonly renderInformers: Map<string, RenderInformer>;
  readonly reconcileStats = { full: 0, incremental: 0, lastRoutes: 0, lastPolicies: 0 };
  private readonly affected: AffectedWriter;
  private readonly renderer: RenderedPublisher;
  private readonly effectivePublisher: EffectivePublisher;
  private readonly status: PolicyStatusWriter;
  /** The kind's aggregate object (e.g. an operator's custom resource), when a setting names one. */
  private aggregate?: AggregatePublisher;
  private pendingAggregate = false;
  /** Objects whose last write failed, with the policies they carry (their status says so). */
  readonly ledger = new PublishLedger(this.metrics);
  private get writeConcurrency(): number {
    return this.opts.writeConcurrency ?? 8;
  }

  constructor(opts: ControllerOptions) {
    super();
    this.opts = opts;
    this.log = opts.log ?? jsonLogger(opts.name);
    this.engine = new PolicyEngine(opts.kind);
    this.queue = this.newQueue();
    const w = this.watch();
    this.policies = w.policies;
    this.grants = w.grants;
    this.effective = w.effective;
    this.renderInformers = w.renderInformers;
    this.ledger.onChange = (object, failure, policies) => this.publishChanged(object, failure, policies);
    const common = this.writerDeps();
    this.effectivePublisher = new EffectivePublisher({
      ...common,
      effective: this.effective,
      uidOf: this.uidOfFn,
    });
    this.renderer = this.newRenderer(common);
    this.affected = new AffectedWriter({ ...common, informers: this.informers });
    const dataPlane = this.watchDataPlane();
    this.aggregate = this.newAggregate();
    this.status = this.newStatusWriter(common, dataPlane);
    this.observe();
    this.elector = electedLeader(opts.client, opts, this.metrics, this.log, () => {
      this.full = true;
      this.downstreamFull = true;
      this.queue.add('sync');
    });
  }

  /**
   * Two lanes: `sync` (flush, EffectivePolicies, policy status) and `downstream` (rendered objects,
   * <Kind>Affected on targets), so re-rendering a large gateway never delays an EffectivePolicy.
   */
  private newQueue(): WorkQueue {
    const q = new WorkQueue((key) => this.reconcile(key), 2, {
      registry: this.metrics,
      name: this.opts.name,
    });
    q.onError = (_k, e) => {
      this.errors.inc();
      this.log('warn', 'reconcile failed, retrying', { error: String(e) });
    };
    return q;
  }

  /** The informers (watches.ts), each event making its work pending. */
  private watch(): ReturnType<typeof controllerWatches> {
    const w = controllerWatches(this.opts, this.engine, this.log, {
      route: (rk) => {
        this.pendingRoutes.add(rk);
        for (const pk of this.engine.topology.routePathKeys(rk)) this.pendingGateways.add(gatewayOfPath(pk));
      },
      gateway: (key) => this.pendingGateways.add(key),
      policy: (id) => this.pendingPolicies.add(id),
      rendered: (key) => this.pendingRendered.add(key),
      effective: (key) => this.pendingEffective.add(key),
      gatewayStatus: () => this.recheckAllStatus(),
      changed: () => this.queue.add('sync'),
    });
    this.informers.push(...w.informers);
    return w;
  }

  /** A write started failing or recovered: logged, an Event on its policies, their Enforced compared again. */
  private publishChanged(object: string, failure: PublishFailure | undefined, policies: string[]): void {
    logPublishChange(this.log, object, failure, { policies });
    if (failure)
      for (const id of policies.slice(0, 10))
        this.policyEvent(id, 'PublishFailed', `could not publish ${object}: ${failure.message}`);
    for (const id of policies) this.pendingPolicies.add(id);
    if (policies.length) this.queue.add('sync');
  }

  /** What every writer of the controller shares. */
  private writerDeps() {
    return {
      engine: this.engine,
      client: this.opts.client,
      kind: this.opts.kind,
      name: this.opts.name,
      ledger: this.ledger,
      writes: this.writes,
      skipped: this.skipped,
      writeConcurrency: this.writeConcurrency,
    };
  }

  private readonly uidOfFn = (path: string, ns: string, name: string) => this.uidOf(path, ns, name);

  /** The writer of what the kind renders; a consumer's readiness moving makes its policies' status pending. */
  private newRenderer(common: ReturnType<PolicyController['writerDeps']>): RenderedPublisher {
    const r = new RenderedPublisher({
      ...common,
      renderInformers: this.renderInformers,
      grants: this.grants,
      log: this.log,
      uidOf: this.uidOfFn,
      settings: this.opts.settings ?? {},
      strictReadiness: this.opts.requireReady === true,
    });
    r.onStatusMoved = (policies) => {
      for (const id of policies) this.pendingPolicies.add(id);
      this.queue.add('sync');
    };
    return r;
  }

  /** The data plane's view (requireWiring), its informers run with ours. */
  private watchDataPlane(): DataPlaneGaps | undefined {
    const opts = this.opts;
    if (!opts.requireWiring || !opts.kind.actions) return undefined;
    if (!opts.dataPlane)
      throw new Error(`${opts.kind.kind}: requireWiring needs a dataPlane source (see data-plane.ts)`);
    // a gateway wired or unwired: every policy's Enforced is compared again (no write if equal)
    const dataPlane = opts.dataPlane(
      opts.client,
      () => this.recheckAllStatus(),
      opts.watchNamespaces,
      opts.settings,
    );
    this.informers.push(...dataPlane.informers);
    return dataPlane;
  }

  /** The kind's aggregate object, when a setting names one. */
  private newAggregate(): AggregatePublisher | undefined {
    const opts = this.opts;
    const settings = opts.settings ?? {};
    if (!opts.kind.aggregate || !AggregatePublisher.enabled(opts.kind.aggregate, settings)) return undefined;
    const aggregate = new AggregatePublisher(
      opts.kind.aggregate,
      {
        engine: this.engine,
        client: opts.client,
        controller: opts.name,
        log: this.log,
        settings,
        writes: this.writes,
        skipped: this.skipped,
      },
      () => {
        // the object changed under us (or appeared): compare again; its status may move Enforced
        this.pendingAggregate = true;
        this.queue.add('downstream');
        if (opts.requireReady) this.recheckAllStatus();
      },
    );
    this.informers.push(aggregate.informer);
    return aggregate;
  }

  /** The policies' status writer, with the facts the Enforced ladder reads. */
  private newStatusWriter(
    common: ReturnType<PolicyController['writerDeps']>,
    dataPlane: DataPlaneGaps | undefined,
  ): PolicyStatusWriter {
    const ready = this.opts.requireReady;
    const gateways = this.informers.find((i) => i.path.endsWith('/gateways'));
    return new PolicyStatusWriter({
      ...common,
      policies: this.policies,
      renderer: this.renderer,
      ...(dataPlane ? { dataPlane } : {}),
      ...(ready && gateways
        ? { gatewayGap: (gw: string) => gatewayNotProgrammed(gateways.cache.get(gw), gw) }
        : {}),
      ...(ready && this.aggregate ? { aggregateGap: () => this.aggregate?.readiness() } : {}),
    });
  }

  /** The queue's and the policies' metrics, and work left pending while not ready run on recovery. */
  private observe(): void {
    this.metrics.gauge('cascade_queue_depth', 'Keys waiting for a reconcile', () => this.queue.depth);
    this.metrics.processMetrics();
    // policies by condition, as alerts want them
    policiesByCondition(this.metrics, this.opts.kind.kind, this.policies);
    watchHealth(this.informers, this.metrics, this.log, '/readyz fails meanwhile', () => {
      this.queue.add('sync');
      this.queue.add('downstream');
    });
  }

  protected describe(): Record<string, unknown> {
    return { kind: this.opts.kind.kind };
  }

  /** Next reconcile compares every object (what the periodic resync does). */
  resyncNow(): void {
    this.full = true;
    this.downstreamFull = true;
    this.queue.add('sync');
  }

  /** One span per reconcile: kind, key, full or incremental, what it looked at, what it wrote, outcome. */
  private reconcile(key: string): Promise<void> {
    const writes = this.writes.get();
    const skipped = this.skipped.get();
    const attributes = {
      'cascade.kind': this.opts.kind.kind,
      'cascade.key': key,
      'cascade.controller': this.opts.name,
    };
    return inSpan(
      'reconcile',
      attributes,
      async () => {
        const outcome = key === 'downstream' ? await this.reconcileDownstream() : await this.reconcileOnce();
        this.reconciles.inc({ lane: key, outcome });
        return {
          'cascade.outcome': outcome,
          'cascade.full': outcome === 'full',
          'cascade.routes': this.reconcileStats.lastRoutes,
          'cascade.policies': this.reconcileStats.lastPolicies,
          'cascade.writes': this.writes.get() - writes,
          'cascade.writes_skipped': this.skipped.get() - skipped,
        };
      },
      () => {
        this.reconciles.inc({ lane: key, outcome: 'error' });
        return { 'cascade.outcome': 'error', 'cascade.writes': this.writes.get() - writes };
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
    const aggregate = this.pendingAggregate;
    this.pendingAggregate = false;
    try {
      this.retry(
        await this.renderer.publish(gateways, rendered),
        (key) => this.pendingRendered.add(key),
        'downstream',
      );
      if (this.aggregate && (full || aggregate || (gateways?.length ?? 0) > 0))
        await this.aggregate.publish(gateways, this.renderer.referenceGrants());
      await this.publishAffected(affected);
    } catch (e) {
      if (aggregate) this.pendingAggregate = true;
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

  /** Every policy's Enforced compared again at the next sync (written only where it differs). */
  private recheckAllStatus(): void {
    for (const key of this.policies.cache.keys()) this.pendingPolicies.add(`${this.opts.kind.kind}:${key}`);
    this.queue.add('sync');
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

  /** `<Kind>Affected` on the targets of the `ids` policies (all when undefined); failures retried. */
  private async publishAffected(ids: string[] | undefined): Promise<void> {
    this.retry(
      await this.affected.publish(ids),
      // the targets' policies are checked again (their other targets compare equal: no write)
      (key) => {
        for (const id of this.engine.attachedAt(key)) this.pendingAffected.add(id);
      },
      'downstream',
    );
  }

  /** Status of `ids` (policy ids; all when undefined), written where it differs; failures retried. */
  private async publishStatus(ids: string[] | undefined): Promise<void> {
    const k = this.opts.kind.kind;
    this.retry(await this.status.publish(ids), (key) => this.pendingPolicies.add(`${k}:${key}`), 'sync');
  }
}

/** `Gateway:ns/name#listener|...` -> `ns/name`. */
function gatewayOfPath(pk: string): string {
  return pk.slice('Gateway:'.length, pk.indexOf('#'));
}
