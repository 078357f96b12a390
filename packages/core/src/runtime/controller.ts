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
import { buildEffectivePolicy, EFFECTIVE_GROUP, MANAGED_BY } from '../effective/effective-policy.ts';
import { renderGateway } from '../effective/render.ts';
import type { PolicyKind, ReferenceGrant, RenderedObject } from '../kind.ts';
import { PolicyEngine } from '../merge/engine.ts';
import { type ChainResult, resolveChain } from '../merge/fold.ts';
import { affectedCondition, type Condition, policyConditions } from '../status/conditions.ts';
import { convertTopology, referenceGrantFromObject } from '../topology/from-k8s.ts';
import { gatewayKey, type PathRef, pathKey, routeKey, ruleName } from '../topology/types.ts';
import { ApiError, type KubeClient, type KubeObject } from './client.ts';
import { Informer, type InformerEvent, startInformers } from './informer.ts';
import { LeaderElector } from './leader.ts';
import { jsonLogger, type Logger, Metrics } from './metrics.ts';
import { WorkQueue } from './queue.ts';
import {
  mergeCondition,
  mergeRouteAffected,
  type RouteParentRef,
  type StatusCondition,
} from './target-status.ts';
import { setupTracing, tracer } from './tracing.ts';

export interface ControllerOptions {
  client: KubeClient;
  kind: PolicyKind;
  /** Field manager and EffectivePolicy owner label. */
  name: string;
  leaseNamespace?: string;
  leaseDurationSeconds?: number;
  identity?: string;
  metricsPort?: number;
  log?: Logger;
  /** Full reconcile (every object compared, orphans collected) at least this often. Default 600. */
  resyncSeconds?: number;
  /** API writes in flight at once within a reconcile. Default 8. */
  writeConcurrency?: number;
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

type EffectivePolicyObject = ReturnType<typeof buildEffectivePolicy>;

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
  private readonly latency = this.metrics.histogram('cascade_reconcile_seconds', 'Reconcile latency');
  private readonly informers: Informer[] = [];
  private readonly effective: Informer;
  private readonly policies: Informer;
  private readonly queue: WorkQueue;
  private readonly elector: LeaderElector;
  private readonly opts: ControllerOptions;
  private readonly log: Logger;
  private server?: Server;
  private started = false;
  /** Next reconcile compares everything (start, new leader, periodic resync). */
  private full = true;
  private resyncTimer?: NodeJS.Timeout;
  /** Desired EffectivePolicies by ns/name, kept between reconciles. */
  private readonly desired = new Map<string, EffectivePolicyObject>();
  /** Route object key -> the ns/name of its EffectivePolicy. */
  private readonly routeEffective = new Map<string, string>();
  /** Gateway-level EffectivePolicy keys. */
  private gatewayEffective = new Set<string>();
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
  private readonly renderInformers = new Map<string, { informer: Informer; base: string; plural: string }>();
  /** Gateway ns/name -> what we rendered for it (renderedKey -> object). */
  private readonly rendered = new Map<string, Map<string, RenderedObject>>();
  /** Every rendered object by renderedKey (kept with `rendered`, not rebuilt per reconcile). */
  private readonly renderedByKey = new Map<string, RenderedObject>();
  /** Policy id -> the object keys (without section) it targeted when last reconciled. */
  private readonly policyTargets = new Map<string, string[]>();
  private readonly missingWarned = new Set<string>();
  /** Topology object -> uid|generation|labels last applied to the engine. */
  private readonly topologySeen = new Map<string, string>();
  readonly reconcileStats = { full: 0, incremental: 0, lastRoutes: 0, lastPolicies: 0 };
  private get writeConcurrency(): number {
    return this.opts.writeConcurrency ?? 8;
  }

  constructor(opts: ControllerOptions) {
    this.opts = opts;
    this.log = opts.log ?? jsonLogger(opts.name);
    this.engine = new PolicyEngine(opts.kind);
    // Two lanes: `sync` (flush, EffectivePolicies, policy status) and `downstream` (rendered objects,
    // <Kind>Affected on targets), so re-rendering a large gateway never delays an EffectivePolicy.
    this.queue = new WorkQueue((key) => this.reconcile(key), 2);
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
      const informer = new Informer(
        c,
        `${base}/${r.plural}?labelSelector=${encodeURIComponent(`${MANAGED_BY}=${opts.name}`)}`,
        (_t, o) => {
          this.pendingRendered.add(`${apiVersion}/${r.kind}/${o.metadata.namespace}/${o.metadata.name}`);
          this.queue.add('sync');
        },
        undefined,
        true,
      );
      this.renderInformers.set(`${apiVersion}/${r.kind}`, { informer, base, plural: r.plural });
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
    this.metrics.gauge('cascade_queue_depth', 'Keys waiting for a reconcile', () => this.queue.depth);
    this.metrics.gauge('cascade_leader', '1 when this replica holds the lease', () =>
      this.elector.leader ? 1 : 0,
    );
    this.elector = new LeaderElector(
      c,
      opts.leaseNamespace ?? 'default',
      `${opts.name}-leader`,
      opts.identity ?? `${hostname()}-${process.pid}`,
      opts.leaseDurationSeconds ?? 15,
      (leader) => {
        this.log('info', leader ? 'became leader' : 'lost leadership');
        if (leader) {
          this.full = true;
          this.downstreamFull = true;
          this.queue.add('sync');
        }
      },
    );
  }

  get ready(): boolean {
    return this.started && this.informers.every((i) => i.synced);
  }

  get leader(): boolean {
    return this.elector.leader;
  }

  async start(): Promise<void> {
    const synced = startInformers(this.informers);
    if (this.opts.metricsPort !== undefined)
      this.server = await this.metrics.serve(this.opts.metricsPort, () => this.ready);
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
    await new Promise((r) => (this.server ? this.server.close(r) : r(undefined)));
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
          span.setAttributes({
            'cascade.outcome': outcome,
            'cascade.full': outcome === 'full',
            'cascade.routes': this.reconcileStats.lastRoutes,
            'cascade.policies': this.reconcileStats.lastPolicies,
            'cascade.writes': this.writes.get() - writes,
            'cascade.writes_skipped': this.skipped.get() - skipped,
          });
        } catch (e) {
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
        await this.publishEffective(routes, effective);
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
      await this.publishRendered(gateways, rendered);
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

  /** The desired EffectivePolicy of one route (undefined: none, nothing applies to it). */
  private routeDesired(route: string): EffectivePolicyObject | undefined {
    const results: [PathRef, ChainResult][] = [];
    for (const pk of this.engine.topology.routePathKeys(route)) {
      const path = this.engine.topology.paths.get(pk);
      const r = this.engine.result(pk);
      if (path && r) results.push([path, r]);
    }
    if (results.length === 0 || results.every(([, r]) => r.rules.size === 0 && r.lost.length === 0))
      return undefined;
    const p = results[0]![0].route;
    const uid = this.uidOf(p.kind === 'HTTPRoute' ? '/httproutes' : '/grpcroutes', p.namespace, p.name);
    return buildEffectivePolicy(
      this.opts.kind,
      this.opts.name,
      { kind: p.kind, namespace: p.namespace, name: p.name, ...(uid ? { uid } : {}) },
      results.sort((a, b) => (pathKey(a[0]) < pathKey(b[0]) ? -1 : 1)),
    );
  }

  /** Gateway level: what the gateway-class, gateway and listener policies make of each listener. */
  private gatewaysDesired(): Map<string, EffectivePolicyObject> {
    const out = new Map<string, EffectivePolicyObject>();
    for (const gw of this.engine.topology.gateways.values()) {
      const results: [PathRef, ChainResult][] = [];
      for (const l of gw.listeners) {
        const path: PathRef = {
          gatewayClass: gw.gatewayClassName,
          gateway: { namespace: gw.namespace, name: gw.name },
          listener: l.name,
          route: { kind: 'HTTPRoute', namespace: '', name: '' },
          rule: '',
        };
        const chain = this.engine.chainOf(path);
        if (chain.length === 0) continue;
        results.push([
          { ...path, route: { kind: 'HTTPRoute', namespace: '', name: '*' }, rule: '*' },
          resolveChain(chain, this.engine.kind.sections),
        ]);
      }
      if (results.length === 0) continue;
      const uid = this.uidOf('/gateways', gw.namespace, gw.name);
      const ep = buildEffectivePolicy(
        this.opts.kind,
        this.opts.name,
        { kind: 'Gateway', namespace: gw.namespace, name: gw.name, ...(uid ? { uid } : {}) },
        results,
      );
      out.set(`${ep.metadata.namespace}/${ep.metadata.name}`, ep);
    }
    return out;
  }

  /**
   * Recomputes the desired EffectivePolicies of `routes` (all when undefined) and of every gateway,
   * then makes the live objects match for those keys and for `extra` keys (live objects that changed).
   */
  private async publishEffective(routes: string[] | undefined, extra: string[] | undefined): Promise<void> {
    const check = new Set<string>(extra ?? []);
    if (routes === undefined) {
      this.desired.clear();
      this.routeEffective.clear();
      for (const route of this.engine.topology.routes.keys()) {
        const ep = this.routeDesired(route);
        if (!ep) continue;
        const key = `${ep.metadata.namespace}/${ep.metadata.name}`;
        this.desired.set(key, ep);
        this.routeEffective.set(route, key);
      }
    } else {
      for (const route of routes) {
        const old = this.routeEffective.get(route);
        if (old) {
          this.desired.delete(old);
          this.routeEffective.delete(route);
          check.add(old);
        }
        const ep = this.routeDesired(route);
        if (!ep) continue;
        const key = `${ep.metadata.namespace}/${ep.metadata.name}`;
        this.desired.set(key, ep);
        this.routeEffective.set(route, key);
        check.add(key);
      }
    }
    for (const key of this.gatewayEffective) {
      this.desired.delete(key);
      check.add(key);
    }
    const gateways = this.gatewaysDesired();
    for (const [key, ep] of gateways) {
      this.desired.set(key, ep);
      check.add(key);
    }
    this.gatewayEffective = new Set(gateways.keys());
    const keys =
      routes === undefined ? new Set([...this.desired.keys(), ...this.effective.cache.keys()]) : check;

    const c = this.opts.client;
    const base = (ns: string) => `/apis/${EFFECTIVE_GROUP}/v1alpha1/namespaces/${ns}/effectivepolicies`;
    await eachLimit(keys, this.writeConcurrency, async (key) => {
      const ep = this.desired.get(key);
      const live = this.effective.cache.get(key);
      if (ep) {
        if (live && isEqual(live.spec, ep.spec) && isEqual(live.metadata.labels, ep.metadata.labels)) {
          this.skipped.inc();
          return;
        }
        // Keep the cache at what we wrote: a reconcile before the watch event must not write again.
        this.effective.cache.set(
          key,
          await c.apply(`${base(ep.metadata.namespace)}/${ep.metadata.name}`, ep, this.opts.name),
        );
        this.writes.inc();
      } else if (live && live.metadata.labels?.['cascade.dev/policy-kind'] === this.opts.kind.kind) {
        await c.request('DELETE', `${base(live.metadata.namespace!)}/${live.metadata.name}`).catch((e) => {
          if ((e as { status?: number }).status !== 404) throw e;
        });
        this.effective.cache.delete(key);
        this.writes.inc();
      }
    });
  }

  /** The ReferenceGrants in the cache, as plain data (invalid ones are ignored: they grant nothing). */
  private referenceGrants(): ReferenceGrant[] {
    const out: ReferenceGrant[] = [];
    for (const o of this.grants.cache.values()) {
      const g = referenceGrantFromObject({ kind: 'ReferenceGrant', metadata: o.metadata, spec: o.spec });
      if (!('error' in g)) out.push(g);
    }
    return out;
  }

  /**
   * Re-renders `gateways` (all when undefined) through the kind's render hook and makes the live
   * objects match: apply what differs, delete what is no longer rendered. Resources that are not
   * served (e.g. the AuthConfig CRD is not installed) are skipped and logged once.
   */
  private async publishRendered(gateways: string[] | undefined, extra: string[] | undefined): Promise<void> {
    if (!this.opts.kind.render) return;
    const check = new Set<string>(extra ?? []);
    const grants = this.referenceGrants();
    const todo = gateways ?? [
      ...new Set([
        ...[...this.engine.topology.gateways.values()].map((g) => `${g.namespace}/${g.name}`),
        ...this.rendered.keys(),
      ]),
    ];
    for (const gw of todo) {
      const [ns, name] = gw.split('/') as [string, string];
      for (const [k, o] of this.rendered.get(gw) ?? []) {
        check.add(k);
        if (this.renderedByKey.get(k) === o) this.renderedByKey.delete(k);
      }
      const uid = this.uidOf('/gateways', ns, name);
      const next = renderGateway(this.engine, ns, name, this.opts.name, uid, grants);
      if (next.size) this.rendered.set(gw, next);
      else this.rendered.delete(gw);
      for (const [k, o] of next) {
        check.add(k);
        this.renderedByKey.set(k, o);
      }
    }
    const desired = this.renderedByKey;
    if (gateways === undefined)
      for (const [res, { informer }] of this.renderInformers)
        for (const o of informer.cache.values())
          check.add(`${res}/${o.metadata.namespace}/${o.metadata.name}`);
    const c = this.opts.client;
    await eachLimit(check, this.writeConcurrency, async (key) => {
      const parts = key.split('/');
      const [ns, name] = parts.slice(-2) as [string, string];
      const res = parts.slice(0, -2).join('/');
      const target = this.renderInformers.get(res);
      if (!target) return;
      if (target.informer.missing) {
        if (!this.missingWarned.has(res)) {
          this.missingWarned.add(res);
          this.log('warn', 'not publishing rendered objects: the resource is not served by the API server', {
            resource: res,
          });
        }
        return;
      }
      const want = desired.get(key);
      const live = target.informer.cache.get(`${ns}/${name}`);
      const path = `${target.base}/namespaces/${ns}/${target.plural}/${name}`;
      if (want) {
        if (live && renderedEqual(live, want)) {
          this.skipped.inc();
          return;
        }
        target.informer.cache.set(`${ns}/${name}`, await c.apply(path, want, this.opts.name));
        this.writes.inc();
      } else if (live && live.metadata.labels?.['cascade.dev/policy-kind'] === this.opts.kind.kind) {
        await c.request('DELETE', path).catch((e) => {
          if ((e as { status?: number }).status !== 404) throw e;
        });
        target.informer.cache.delete(`${ns}/${name}`);
        this.writes.inc();
      }
    });
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
      const now = (this.engine.policy(id)?.policy?.targets ?? []).map((t) => base(t.key));
      if (now.length) this.policyTargets.set(id, [...new Set(now)]);
      else this.policyTargets.delete(id);
      for (const t of now) targets.add(t);
    }
    const type = `${k.kind}Affected`;
    const nowTime = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    await eachLimit(targets, this.writeConcurrency, async (key) => {
      const colon = key.indexOf(':');
      const kind = key.slice(0, colon);
      const [ns, name] = key.slice(colon + 1).split('/') as [string, string];
      if (kind === 'Gateway') await this.gatewayAffected(key, ns, name, type, nowTime);
      else if (kind === 'HTTPRoute' || kind === 'GRPCRoute')
        await this.routeAffected(key, kind, ns, name, type, nowTime);
    });
  }

  private affectedFor(
    key: string,
    sections: string[],
    generation: number | undefined,
  ): StatusCondition | undefined {
    const attached =
      this.engine.attachedAt(key).length > 0 ||
      sections.some((s) => this.engine.attachedAt(`${key}#${s}`).length > 0);
    if (!attached) return undefined;
    return { ...affectedCondition(this.engine, key, sections), observedGeneration: generation ?? 0 };
  }

  private async gatewayAffected(
    key: string,
    ns: string,
    name: string,
    type: string,
    now: string,
  ): Promise<void> {
    const informer = this.informers.find((i) => i.path.endsWith('/gateways'))!;
    const live = informer.cache.get(`${ns}/${name}`);
    if (!live) return;
    const gw = this.engine.topology.gateways.get(gatewayKey(ns, name));
    const cond = this.affectedFor(key, gw?.listeners.map((l) => l.name) ?? [], live.metadata.generation);
    const current = ((live.status as { conditions?: StatusCondition[] } | undefined)?.conditions ?? []).find(
      (x) => x.type === type,
    );
    if ((!cond && !current) || (cond && current && sameStatusCondition(cond, current))) {
      this.skipped.inc();
      return;
    }
    // status.conditions is a map keyed by type: applying our one condition merges with the others';
    // applying none removes ours.
    const conditions = cond ? mergeCondition(current ? [current] : [], cond, type, now) : [];
    const applied = await this.opts.client.apply(
      `${GW}/namespaces/${ns}/gateways/${name}/status`,
      {
        apiVersion: 'gateway.networking.k8s.io/v1',
        kind: 'Gateway',
        metadata: { name, namespace: ns },
        status: { conditions },
      },
      `${this.opts.name}-affected`,
    );
    informer.cache.set(`${ns}/${name}`, applied);
    this.writes.inc();
  }

  private async routeAffected(
    key: string,
    kind: string,
    ns: string,
    name: string,
    type: string,
    now: string,
  ): Promise<void> {
    const plural = kind === 'HTTPRoute' ? 'httproutes' : 'grpcroutes';
    const informer = this.informers.find((i) => i.path.endsWith(`/${plural}`))!;
    let live = informer.cache.get(`${ns}/${name}`);
    const route = this.engine.topology.routes.get(key);
    const sections = (route?.rules ?? []).map((r, i) => ruleName(r, i));
    // status.parents is an atomic list: read-modify-write with optimistic concurrency.
    for (let attempt = 0; live && attempt < 5; attempt++) {
      const cond = this.affectedFor(key, sections, live.metadata.generation);
      const parentRefs = ((live.spec as { parentRefs?: RouteParentRef[] } | undefined)?.parentRefs ??
        []) as RouteParentRef[];
      const merged = mergeRouteAffected(live.status as never, ns, parentRefs, type, cond, now);
      if (!merged) {
        this.skipped.inc();
        return;
      }
      try {
        const updated = await this.opts.client.request<KubeObject>(
          'PUT',
          `${GW}/namespaces/${ns}/${plural}/${name}/status`,
          { ...live, status: { ...(live.status as object), parents: merged.parents } },
        );
        informer.cache.set(`${ns}/${name}`, updated);
        this.writes.inc();
        return;
      } catch (e) {
        if (!(e instanceof ApiError) || e.status !== 409) throw e;
        live = await this.opts.client
          .request<KubeObject>('GET', `${GW}/namespaces/${ns}/${plural}/${name}`)
          .catch(() => undefined);
      }
    }
  }

  /** Status of `ids` (policy ids; all when undefined), written only where the conditions differ. */
  private async publishStatus(ids: string[] | undefined): Promise<void> {
    const k = this.opts.kind;
    const keys =
      ids === undefined
        ? [...this.policies.cache.keys()]
        : ids.filter((id) => id.startsWith(`${k.kind}:`)).map((id) => id.slice(k.kind.length + 1));
    await eachLimit(keys, this.writeConcurrency, async (key) => {
      const live = this.policies.cache.get(key);
      if (!live) return; // deleted meanwhile: nothing to write
      const [ns, name] = key.split('/') as [string, string];
      const id = `${k.kind}:${ns}/${name}`;
      const liveConds =
        (live.status as { conditions?: (Condition & { lastTransitionTime?: string })[] } | undefined)
          ?.conditions ?? [];
      const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
      const conds = policyConditions(this.engine, id).map((cnd) => {
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
  }
}

/** `Gateway:ns/name#listener|...` -> `ns/name`. */
function gatewayOfPath(pk: string): string {
  return pk.slice('Gateway:'.length, pk.indexOf('#'));
}

const sameStatusCondition = (a: StatusCondition, b: StatusCondition) =>
  a.status === b.status &&
  a.reason === b.reason &&
  a.message === b.message &&
  (a.observedGeneration ?? 0) === (b.observedGeneration ?? 0);

/** A live rendered object already carries what we would apply (fields, our labels and annotations, owners). */
function renderedEqual(live: KubeObject, want: RenderedObject): boolean {
  for (const [f, v] of Object.entries(want)) {
    if (f === 'apiVersion' || f === 'kind' || f === 'metadata') continue;
    if (!isEqual((live as unknown as Record<string, unknown>)[f], v)) return false;
  }
  const lm = live.metadata as {
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: { uid: string }[];
  };
  for (const [k, v] of Object.entries(want.metadata.labels ?? {})) if (lm.labels?.[k] !== v) return false;
  const wa = want.metadata.annotations ?? {};
  for (const [k, v] of Object.entries(wa)) if (lm.annotations?.[k] !== v) return false;
  for (const k of Object.keys(lm.annotations ?? {}))
    if (k.startsWith('cascade.dev/') && !(k in wa)) return false;
  const wo = (want.metadata as { ownerReferences?: { uid: string }[] }).ownerReferences;
  if (
    wo &&
    !isEqual(
      (lm.ownerReferences ?? []).map((o) => o.uid),
      wo.map((o) => o.uid),
    )
  )
    return false;
  return true;
}

/**
 * The controller binary's main: kubeconfig (or in-cluster config), lease in POD_NAMESPACE, metrics on
 * METRICS_PORT, graceful stop on SIGTERM.
 */
export async function runPolicyController(kind: PolicyKind, name: string): Promise<PolicyController> {
  const { KubeConfig } = await import('@kubernetes/client-node');
  const { KubeClient } = await import('./client.ts');
  const kc = new KubeConfig();
  kc.loadFromDefault();
  const controller = new PolicyController({
    client: new KubeClient(kc),
    kind,
    name,
    leaseNamespace: process.env.POD_NAMESPACE ?? 'cascade-system',
    metricsPort: Number(process.env.METRICS_PORT ?? 8080),
  });
  const stopTracing = setupTracing(name);
  await controller.start();
  process.on(
    'SIGTERM',
    () =>
      void controller
        .stop()
        .then(() => stopTracing?.())
        .then(() => process.exit(0)),
  );
  return controller;
}
