// EffectivePolicy objects: one per route that any policy of the kind reaches, and one per Gateway
// for its listeners (what gateway-class, gateway and listener policies make of them). Recomputed for
// the routes a flush touched (all on a full pass, orphans with our label deleted) and written only
// where the live object differs. Each object is written on its own (see publish.ts).
import { isEqual } from 'lodash-es';
import { buildEffectivePolicy, EFFECTIVE_GROUP } from '../effective/effective-policy.ts';
import type { Informer } from '../kube/informer.ts';
import { type ChainResult, resolveChain } from '../merge/fold.ts';
import { type PathRef, pathKey } from '../topology/types.ts';
import { checkSize, type PublishFailure, type WriterDeps } from './publish.ts';

type EffectivePolicyObject = ReturnType<typeof buildEffectivePolicy>;

export interface EffectiveDeps extends WriterDeps {
  effective: Informer;
  uidOf: (path: string, ns: string, name: string) => string | undefined;
}

export class EffectivePublisher {
  private readonly deps: EffectiveDeps;
  /** Desired EffectivePolicies by ns/name, kept between reconciles. */
  private readonly desired = new Map<string, EffectivePolicyObject>();
  /** Route object key -> the ns/name of its EffectivePolicy. */
  private readonly routeEffective = new Map<string, string>();
  /** Gateway-level EffectivePolicy keys. */
  private gatewayEffective = new Set<string>();

  constructor(deps: EffectiveDeps) {
    this.deps = deps;
  }

  /** The desired EffectivePolicy of one route (undefined: none, nothing applies to it). */
  private routeDesired(route: string): EffectivePolicyObject | undefined {
    const results: [PathRef, ChainResult][] = [];
    for (const pk of this.deps.engine.topology.routePathKeys(route)) {
      const path = this.deps.engine.topology.paths.get(pk);
      const r = this.deps.engine.result(pk);
      if (path && r) results.push([path, r]);
    }
    if (results.length === 0 || results.every(([, r]) => r.rules.size === 0 && r.lost.length === 0))
      return undefined;
    const p = results[0]![0].route;
    const uid = this.deps.uidOf(p.kind === 'HTTPRoute' ? '/httproutes' : '/grpcroutes', p.namespace, p.name);
    return buildEffectivePolicy(
      this.deps.kind,
      this.deps.name,
      { kind: p.kind, namespace: p.namespace, name: p.name, ...(uid ? { uid } : {}) },
      results.sort((a, b) => (pathKey(a[0]) < pathKey(b[0]) ? -1 : 1)),
    );
  }

  /** Gateway level: what the gateway-class, gateway and listener policies make of each listener. */
  private gatewaysDesired(): Map<string, EffectivePolicyObject> {
    const out = new Map<string, EffectivePolicyObject>();
    for (const gw of this.deps.engine.topology.gateways.values()) {
      const results: [PathRef, ChainResult][] = [];
      for (const l of gw.listeners) {
        const path: PathRef = {
          gatewayClass: gw.gatewayClassName,
          gateway: { namespace: gw.namespace, name: gw.name },
          listener: l.name,
          route: { kind: 'HTTPRoute', namespace: '', name: '' },
          rule: '',
        };
        const chain = this.deps.engine.chainOf(path);
        if (chain.length === 0) continue;
        results.push([
          { ...path, route: { kind: 'HTTPRoute', namespace: '', name: '*' }, rule: '*' },
          resolveChain(chain, this.deps.engine.kind.sections),
        ]);
      }
      if (results.length === 0) continue;
      const uid = this.deps.uidOf('/gateways', gw.namespace, gw.name);
      const ep = buildEffectivePolicy(
        this.deps.kind,
        this.deps.name,
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
  async publish(
    routes: string[] | undefined,
    extra: string[] | undefined,
  ): Promise<{ item: string; failure: PublishFailure }[]> {
    const check = new Set<string>(extra ?? []);
    if (routes === undefined) {
      this.desired.clear();
      this.routeEffective.clear();
      for (const route of this.deps.engine.topology.routes.keys()) {
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
      routes === undefined ? new Set([...this.desired.keys(), ...this.deps.effective.cache.keys()]) : check;

    const c = this.deps.client;
    const base = (ns: string) => `/apis/${EFFECTIVE_GROUP}/v1alpha1/namespaces/${ns}/effectivepolicies`;
    const carried = (key: string) =>
      (this.desired.get(key)?.spec.sources ?? []).map(
        (r) => `${this.deps.kind.kind}:${r.namespace}/${r.name}`,
      );
    const what = (key: string) => ({ object: `EffectivePolicy ${key}`, policies: () => carried(key) });
    const failed = await this.deps.ledger.each(keys, this.deps.writeConcurrency, what, async (key) => {
      const ep = this.desired.get(key);
      const live = this.deps.effective.cache.get(key);
      if (ep) {
        if (live && isEqual(live.spec, ep.spec) && isEqual(live.metadata.labels, ep.metadata.labels)) {
          this.deps.skipped.inc();
          return;
        }
        checkSize(ep);
        // Keep the cache at what we wrote: a reconcile before the watch event must not write again.
        this.deps.effective.cache.set(
          key,
          await c.apply(`${base(ep.metadata.namespace)}/${ep.metadata.name}`, ep, this.deps.name),
        );
        this.deps.writes.inc();
      } else if (live && live.metadata.labels?.['cascade.dev/policy-kind'] === this.deps.kind.kind) {
        await c.request('DELETE', `${base(live.metadata.namespace!)}/${live.metadata.name}`).catch((e) => {
          if ((e as { status?: number }).status !== 404) throw e;
        });
        this.deps.effective.cache.delete(key);
        this.deps.writes.inc();
      }
    });
    return failed;
  }
}
