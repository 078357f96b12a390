// The gateway-wiring controller: the one writer of each gateway's data-plane wiring (the provider
// objects that carry its wasm-shim configuration: WasmPlugin (several for a large configuration,
// shim/shards.ts) + EnvoyFilters for Istio, EnvoyExtensionPolicy + EnvoyPatchPolicies for Envoy
// Gateway). Kind-agnostic: it resolves every
// gateway policy kind it is given with the same engines the kind controllers use (so the AuthConfig
// hosts and limit keys it points at are the ones they publish) and asks each kind for its actions
// through PolicyKind.actions; wiring/ assembles them. Leader-elected; objects are written by
// server-side apply only when their content differs (steady state: zero writes) and deleted when a
// gateway has no action set left or its class is not a known provider. A provider whose CRDs are not
// served gets nothing (logged once; published as soon as they are).

import type { PolicyKind, RenderedObject } from '@cascade/core';
import {
  gatewayKey,
  logPublishChange,
  PolicyEngine,
  type PublishFailure,
  PublishLedger,
  policyInformer,
  RenderedPublisher,
  renderedKey,
  renderInformers,
  routeKey,
  TOPOLOGY_RESOURCES,
  TopologyFeed,
} from '@cascade/core';
import {
  ControllerProcess,
  electedLeader,
  Informer,
  jsonLogger,
  type LeaderElector,
  type Logger,
  type ProcessOptions,
  postWarningEvent,
  WorkQueue,
  watchHealth,
} from '@cascade/core/kube';
import {
  DEFAULT_PROVIDERS,
  PROVIDER_RESOURCES,
  type ProviderSettings,
  providerOf,
  WIRING_LABEL,
} from '../providers/providers.ts';
import { DEFAULT_WIRING, hasActions, type WiringProblem, type WiringSettings } from '../shim/wasm.ts';
import { gatewayWiring } from './gateway.ts';
import { wiringObjects } from './objects.ts';

export interface WiringControllerOptions extends ProcessOptions {
  kinds: readonly PolicyKind[];
  /** Each kind's settings (limitadorNamespace...), by kind name: they must be the kind controllers'. */
  kindSettings?: ReadonlyMap<string, Readonly<Record<string, string>>>;
  wiring?: WiringSettings;
  providers?: ProviderSettings;
}

/** The resources the wiring writes, as a render target (informers, RBAC, the served check). */
export const WIRING_RESOURCES = [...PROVIDER_RESOURCES.istio, ...PROVIDER_RESOURCES['envoy-gateway']];

/** Refused routes logged and posted as Events one by one, per gateway and reconcile. */
const MAX_REFUSAL_EVENTS = 20;

/** What the wiring-controller renders, as core's RenderedPublisher reads a kind: the providers' resources. */
const WIRING_TARGET = { kind: 'GatewayWiring', renders: WIRING_RESOURCES } as unknown as PolicyKind;

export class WiringController extends ControllerProcess {
  readonly engines: PolicyEngine[];
  readonly writes = this.metrics.counter('cascade_writes_issued_total', 'API writes issued (apply, delete)');
  readonly skipped = this.metrics.counter(
    'cascade_writes_skipped_total',
    'Writes skipped because the live object already matched',
  );
  readonly ledger = new PublishLedger(this.metrics);
  /** The routes each gateway's wiring refused (fail closed), by gateway ns/name. */
  readonly problems = new Map<string, WiringProblem[]>();
  private readonly errors = this.metrics.counter('cascade_reconcile_errors_total', 'Failed reconciles');
  protected readonly queue: WorkQueue;
  protected readonly elector: LeaderElector;
  private readonly renderer: RenderedPublisher;
  protected readonly opts: WiringControllerOptions;
  protected readonly log: Logger;
  private readonly pendingGateways = new Set<string>();
  private readonly pendingRendered = new Set<string>();
  private readonly unknownClassWarned = new Set<string>();
  private full = true;

  constructor(opts: WiringControllerOptions) {
    super();
    this.opts = opts;
    this.log = opts.log ?? jsonLogger(opts.name);
    this.engines = opts.kinds.map((k) => new PolicyEngine(k));
    this.queue = new WorkQueue(() => this.reconcile(), 1, { registry: this.metrics, name: opts.name });
    this.queue.onError = (_k, e) => {
      this.errors.inc();
      this.log('warn', 'reconcile failed, retrying', { error: String(e) });
    };
    this.watchTopology();
    opts.kinds.forEach((k, i) => {
      this.informers.push(policyInformer(opts.client, k, this.engines[i]!, this.wake, opts.watchNamespaces));
    });
    const grants = this.watchGrants();
    this.renderer = this.newRenderer(grants, this.watchWritten());
    this.ledger.onChange = (object, failure) => logPublishChange(this.log, object, failure);
    this.observe();
    this.elector = electedLeader(opts.client, opts, this.metrics, this.log, () => {
      this.full = true;
      this.wake();
    });
  }

  private readonly wake = () => this.queue.add('wiring');

  /** Every gateway is wired again (a class, a grant or a provider's resource changed). */
  private allGateways(): void {
    for (const gw of this.engines[0]?.topology.gateways.values() ?? [])
      this.pendingGateways.add(`${gw.namespace}/${gw.name}`);
  }

  /** The Gateway API objects, fed to every engine; a change makes the gateways it touches pending. */
  private watchTopology(): void {
    const feeds = this.engines.map((e) => new TopologyFeed(e, this.log));
    for (const [path, kind, scoped] of TOPOLOGY_RESOURCES)
      this.informers.push(
        new Informer(
          this.opts.client,
          path,
          (type, o) => {
            const ns = o.metadata.namespace ?? 'default';
            // the route's gateways before and after (matches and hostnames change the wiring)
            const before =
              kind === 'HTTPRoute' || kind === 'GRPCRoute'
                ? this.routeGateways(routeKey(kind, ns, o.metadata.name))
                : [];
            let changed = false;
            for (const f of feeds) changed = f.apply(type, o, kind) || changed;
            if (!changed) return;
            if (kind === 'HTTPRoute' || kind === 'GRPCRoute')
              for (const gw of [...before, ...this.routeGateways(routeKey(kind, ns, o.metadata.name))])
                this.pendingGateways.add(gw);
            else if (kind === 'Gateway') this.pendingGateways.add(`${ns}/${o.metadata.name}`);
            else if (kind === 'GatewayClass') this.allGateways();
            this.wake();
          },
          undefined,
          false,
          scoped === 'namespaced' ? this.opts.watchNamespaces : undefined,
        ),
      );
  }

  /** ReferenceGrants: a change may let a route reach another namespace's objects. */
  private watchGrants(): Informer {
    const grants = new Informer(
      this.opts.client,
      '/apis/gateway.networking.k8s.io/v1beta1/referencegrants',
      () => {
        this.allGateways();
        this.wake();
      },
      undefined,
      true,
      this.opts.watchNamespaces,
    );
    this.informers.push(grants);
    return grants;
  }

  /** The providers' objects this controller writes (optional: a provider whose CRDs are not served). */
  private watchWritten(): ReturnType<typeof renderInformers> {
    const rendered = renderInformers(
      this.opts.client,
      WIRING_TARGET,
      this.opts.name,
      {},
      (key) => {
        this.pendingRendered.add(key);
        this.wake();
      },
      this.opts.watchNamespaces,
    );
    for (const [res, { informer }] of rendered) {
      informer.onServed = (served) => {
        this.log(
          'info',
          served
            ? 'provider resource now served: wiring every gateway'
            : 'provider resource no longer served',
          { resource: res },
        );
        this.allGateways();
        this.wake();
      };
      this.informers.push(informer);
    }
    return rendered;
  }

  /** Core's RenderedPublisher, rendering each gateway's provider objects (renderGateway). */
  private newRenderer(grants: Informer, rendered: ReturnType<typeof renderInformers>): RenderedPublisher {
    return new RenderedPublisher({
      engine: this.engines[0]!,
      client: this.opts.client,
      kind: WIRING_TARGET,
      name: this.opts.name,
      ledger: this.ledger,
      writes: this.writes,
      skipped: this.skipped,
      writeConcurrency: this.opts.writeConcurrency ?? 8,
      renderInformers: rendered,
      grants,
      log: this.log,
      uidOf: (_p, ns, name) =>
        this.informers.find((i) => i.path.endsWith('/gateways'))?.cache.get(`${ns}/${name}`)?.metadata.uid,
      settings: {},
      render: (ns, name, uid, g) => this.renderGateway(ns, name, uid, g),
      carried: (gw) => this.carried(gw),
      owns: (live) => live.metadata.labels?.[WIRING_LABEL] !== undefined,
      // a gateway's WasmPlugin holds every route's action set (500 KB at 200 routes): a route's change
      // is sent as a JSON patch of that set, not the whole object applied again. Every update of a
      // wiring object goes this way (this controller is their one writer), so no field is left
      // owned by an Update that an apply would not remove
      patchFrom: 0,
    });
  }

  /** The refused-routes gauge and the process metrics; work left pending while not ready runs on recovery. */
  private observe(): void {
    this.metrics.gauge(
      'cascade_wiring_refused_routes',
      'Routes refused (denied) by the wiring of their gateway',
      () => [...this.problems.values()].reduce((n, p) => n + new Set(p.map((x) => x.route)).size, 0),
    );
    this.metrics.processMetrics();
    watchHealth(this.informers, this.metrics, this.log, '/readyz fails meanwhile', this.wake);
  }

  protected describe(): Record<string, unknown> {
    return { kinds: this.opts.kinds.map((k) => k.kind) };
  }

  resyncNow(): void {
    this.full = true;
    this.queue.add('wiring');
  }

  private routeGateways(rk: string): string[] {
    const out = new Set<string>();
    for (const pk of this.engines[0]?.topology.routePathKeys(rk) ?? [])
      out.add(pk.slice('Gateway:'.length, pk.indexOf('#')));
    return [...out];
  }

  private carried(gw: string): string[] {
    const [ns, name] = gw.split('/') as [string, string];
    const ids = new Set<string>();
    for (const e of this.engines)
      for (const pk of e.topology.pathsThrough(gatewayKey(ns, name)))
        for (const r of e.result(pk)?.sources ?? []) ids.add(`${r.kind}:${r.namespace}/${r.name}`);
    return [...ids];
  }

  /** One gateway's provider objects (empty: none wanted). */
  private renderGateway(
    ns: string,
    name: string,
    uid: string | undefined,
    grants: import('@cascade/core').ReferenceGrant[],
  ): Map<string, RenderedObject> {
    const out = new Map<string, RenderedObject>();
    const gw = `${ns}/${name}`;
    const topology = this.engines[0]!.topology;
    const className = topology.gateways.get(gatewayKey(ns, name))?.gatewayClassName;
    const controllerName = className ? topology.classes.get(className)?.controllerName : undefined;
    const providers = this.opts.providers ?? DEFAULT_PROVIDERS;
    const provider = providerOf(controllerName, providers);
    const w = gatewayWiring(this.engines, ns, name, {
      controller: this.opts.name,
      referenceGrants: grants,
      ...(this.opts.kindSettings ? { kindSettings: this.opts.kindSettings } : {}),
      wiring: this.opts.wiring ?? DEFAULT_WIRING,
      ...(provider ? { provider } : {}),
    });
    this.reportProblems(gw, w?.problems ?? []);
    if (!w || !hasActions(w.config)) return out;
    if (!provider) {
      if (!this.unknownClassWarned.has(gw)) {
        this.unknownClassWarned.add(gw);
        this.log('warn', 'gateway not wired: its GatewayClass controller is not a known provider', {
          gateway: gw,
          gatewayClass: className,
          controllerName,
        });
      }
      return out;
    }
    this.unknownClassWarned.delete(gw);
    const target = { gateway: { namespace: ns, name, ...(uid ? { uid } : {}) }, controller: this.opts.name };
    for (const o of wiringObjects(provider, target, w, this.opts.wiring ?? DEFAULT_WIRING, providers))
      out.set(renderedKey(o), o);
    return out;
  }

  /** Refused routes: logged and a Warning Event on the route when the refusal is new. */
  private reportProblems(gw: string, problems: WiringProblem[]): void {
    const before = new Set((this.problems.get(gw) ?? []).map((p) => `${p.route}|${p.reason}`));
    if (problems.length) this.problems.set(gw, problems);
    else this.problems.delete(gw);
    // a namespace over its share can refuse thousands of routes at once: the first ones are logged and
    // posted, the rest counted (the metric counts them all)
    let posted = 0;
    let unposted = 0;
    for (const p of problems) {
      if (before.has(`${p.route}|${p.reason}`)) continue;
      if (posted >= MAX_REFUSAL_EVENTS) {
        unposted++;
        continue;
      }
      posted++;
      this.log('warn', 'route refused by the gateway wiring (its requests are denied)', {
        gateway: gw,
        route: p.route,
        reason: p.reason,
      });
      if (!this.elector?.leader) continue;
      const [kind, namespace, name] = p.route.split('/') as [string, string, string];
      void postWarningEvent(
        this.opts.client,
        { apiVersion: 'gateway.networking.k8s.io/v1', kind, namespace, name },
        'WiringRefused',
        `gateway ${gw}: ${p.reason}`.slice(0, 1000),
        { component: this.opts.name },
      ).catch(() => undefined);
    }
    if (unposted > 0)
      this.log('warn', 'more routes refused by the gateway wiring than are logged one by one', {
        gateway: gw,
        notLogged: unposted,
      });
  }

  private async reconcile(): Promise<void> {
    if (!this.ready || !this.elector.leader) return;
    for (const e of this.engines) {
      const report = e.flush();
      for (const pk of [...report.changed, ...report.removed])
        this.pendingGateways.add(pk.slice('Gateway:'.length, pk.indexOf('#')));
    }
    const full = this.full;
    this.full = false;
    const gateways = full ? undefined : [...this.pendingGateways];
    const rendered = full ? undefined : [...this.pendingRendered];
    this.pendingGateways.clear();
    this.pendingRendered.clear();
    let failed: { item: string; failure: PublishFailure }[];
    try {
      failed = await this.renderer.publish(gateways, rendered);
    } catch (e) {
      if (full) this.full = true;
      for (const g of gateways ?? []) this.pendingGateways.add(g);
      for (const r of rendered ?? []) this.pendingRendered.add(r);
      throw e;
    }
    let delay = Number.POSITIVE_INFINITY;
    for (const { item, failure } of failed) {
      if (failure.permanent) continue;
      this.pendingRendered.add(item);
      delay = Math.min(delay, PublishLedger.backoffMs(failure));
    }
    if (delay !== Number.POSITIVE_INFINITY) setTimeout(() => this.queue.add('wiring'), delay).unref();
  }
}
