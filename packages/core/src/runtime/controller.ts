// The policy controller for one kind: informers feed the engine, one coalesced reconcile publishes
// EffectivePolicies and policy status by server-side apply, and only when the desired content differs
// from the live object (steady state: zero writes). Only the lease holder writes.

import type { Server } from 'node:http';
import { hostname } from 'node:os';
import { isEqual } from 'lodash-es';
import { buildEffectivePolicy, EFFECTIVE_GROUP, MANAGED_BY } from '../effective/effective-policy.ts';
import type { PolicyKind } from '../kind.ts';
import { PolicyEngine } from '../merge/engine.ts';
import type { ChainResult } from '../merge/fold.ts';
import { type Condition, policyConditions } from '../status/conditions.ts';
import { convertTopology } from '../topology/from-k8s.ts';
import { gatewayKey, type PathRef, routeKey } from '../topology/types.ts';
import type { KubeClient, KubeObject } from './client.ts';
import { Informer, type InformerEvent } from './informer.ts';
import { LeaderElector } from './leader.ts';
import { jsonLogger, type Logger, Metrics } from './metrics.ts';
import { WorkQueue } from './queue.ts';

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
}

const GW = '/apis/gateway.networking.k8s.io/v1';

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

  constructor(opts: ControllerOptions) {
    this.opts = opts;
    this.log = opts.log ?? jsonLogger(opts.name);
    this.engine = new PolicyEngine(opts.kind);
    this.queue = new WorkQueue(() => this.reconcile(), 1);
    this.queue.onError = (_k, e) => {
      this.errors.inc();
      this.log('warn', 'reconcile failed, retrying', { error: String(e) });
    };
    const c = opts.client;
    const topo = (type: InformerEvent, o: KubeObject, kind: string) => {
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
      this.queue.add('sync');
    });
    this.effective = new Informer(
      c,
      `/apis/${EFFECTIVE_GROUP}/v1alpha1/effectivepolicies?labelSelector=${encodeURIComponent(`${MANAGED_BY}=${opts.name}`)}`,
      () => this.queue.add('sync'),
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
        if (leader) this.queue.add('sync');
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
    for (const i of this.informers) i.start();
    if (this.opts.metricsPort !== undefined)
      this.server = await this.metrics.serve(this.opts.metricsPort, () => this.ready);
    while (!this.informers.every((i) => i.synced)) await new Promise((r) => setTimeout(r, 50));
    this.started = true;
    this.elector.start();
    this.log('info', 'caches synced', { kind: this.opts.kind.kind });
  }

  /** Graceful stop: no new work, finish in-flight reconciles, release the lease. */
  async stop(opts: { releaseLease?: boolean } = {}): Promise<void> {
    for (const i of this.informers) i.stop();
    this.queue.stop();
    await this.queue.drain();
    // releaseLease false: leave as a killed process would (the lease expires on its own).
    if (opts.releaseLease === false) this.elector.abandon();
    else await this.elector.release();
    await new Promise((r) => (this.server ? this.server.close(r) : r(undefined)));
  }

  /** Waits until nothing is queued or running (tests). */
  async idle(): Promise<void> {
    await this.queue.drain();
  }

  private async reconcile(): Promise<void> {
    if (!this.ready || !this.elector.leader) return;
    const t0 = process.hrtime.bigint();
    this.engine.flush();
    await this.publishEffective();
    await this.publishStatus();
    this.latency.observe(Number(process.hrtime.bigint() - t0) / 1e9);
  }

  private desiredEffective(): Map<string, ReturnType<typeof buildEffectivePolicy>> {
    const k = this.opts.kind;
    const byRoute = new Map<string, [PathRef, ChainResult][]>();
    for (const [path, r] of this.engine.results()) {
      const key = routeKey(path.route.kind, path.route.namespace, path.route.name);
      let l = byRoute.get(key);
      if (!l) byRoute.set(key, (l = []));
      l.push([path, r]);
    }
    const out = new Map<string, ReturnType<typeof buildEffectivePolicy>>();
    const uidOf = (path: string, ns: string, name: string) =>
      this.informers.find((i) => i.path.endsWith(path))?.cache.get(`${ns}/${name}`)?.metadata.uid;
    for (const [key, results] of byRoute) {
      if (results.every(([, r]) => r.rules.size === 0 && r.lost.length === 0)) continue;
      const p = results[0]![0].route;
      const uid = uidOf(p.kind === 'HTTPRoute' ? '/httproutes' : '/grpcroutes', p.namespace, p.name);
      const ep = buildEffectivePolicy(
        k,
        this.opts.name,
        { kind: p.kind, namespace: p.namespace, name: p.name, ...(uid ? { uid } : {}) },
        results,
      );
      out.set(`${ep.metadata.namespace}/${ep.metadata.name}`, ep);
      void key;
    }
    // Gateway level: what the gateway-class, gateway and listener policies make of each listener.
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
          resolveChainFor(this.engine, chain),
        ]);
      }
      if (results.length === 0) continue;
      const uid = uidOf('/gateways', gw.namespace, gw.name);
      const ep = buildEffectivePolicy(
        k,
        this.opts.name,
        { kind: 'Gateway', namespace: gw.namespace, name: gw.name, ...(uid ? { uid } : {}) },
        results,
      );
      out.set(`${ep.metadata.namespace}/${ep.metadata.name}`, ep);
      void gatewayKey;
    }
    return out;
  }

  private async publishEffective(): Promise<void> {
    const c = this.opts.client;
    const desired = this.desiredEffective();
    const base = (ns: string) => `/apis/${EFFECTIVE_GROUP}/v1alpha1/namespaces/${ns}/effectivepolicies`;
    for (const [key, ep] of desired) {
      const live = this.effective.cache.get(key);
      if (live && isEqual(live.spec, ep.spec) && isEqual(live.metadata.labels, ep.metadata.labels)) {
        this.skipped.inc();
        continue;
      }
      // Keep the cache at what we wrote: a reconcile before the watch event must not write again.
      this.effective.cache.set(
        key,
        await c.apply(`${base(ep.metadata.namespace)}/${ep.metadata.name}`, ep, this.opts.name),
      );
      this.writes.inc();
    }
    for (const [key, live] of this.effective.cache) {
      if (desired.has(key) || live.metadata.labels?.['cascade.dev/policy-kind'] !== this.opts.kind.kind)
        continue;
      await c.request('DELETE', `${base(live.metadata.namespace!)}/${live.metadata.name}`).catch((e) => {
        if ((e as { status?: number }).status !== 404) throw e;
      });
      this.writes.inc();
    }
  }

  private async publishStatus(): Promise<void> {
    const k = this.opts.kind;
    for (const [key, live] of this.policies.cache) {
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
        continue;
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
    }
  }
}

import { resolveChain } from '../merge/fold.ts';

function resolveChainFor(engine: PolicyEngine, chain: ReturnType<PolicyEngine['chainOf']>): ChainResult {
  return resolveChain(chain, engine.kind.sections);
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
  await controller.start();
  process.on('SIGTERM', () => void controller.stop().then(() => process.exit(0)));
  return controller;
}
