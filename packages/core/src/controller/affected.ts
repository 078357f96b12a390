import { ApiError, type KubeObject } from '../kube/client.ts';
import type { Informer } from '../kube/informer.ts';
import { affectedCondition } from '../status/conditions.ts';
import { gatewayKey, ruleName } from '../topology/types.ts';
import type { PublishFailure, WriterDeps } from './publish.ts';
import {
  mergeCondition,
  mergeRouteAffected,
  type RouteParentRef,
  type StatusCondition,
} from './target-status.ts';

const GW = '/apis/gateway.networking.k8s.io/v1';

const sameStatusCondition = (a: StatusCondition, b: StatusCondition) =>
  a.status === b.status &&
  a.reason === b.reason &&
  a.message === b.message &&
  (a.observedGeneration ?? 0) === (b.observedGeneration ?? 0);

export interface AffectedDeps extends WriterDeps {
  informers: readonly Informer[];
}

export class AffectedWriter {
  private readonly deps: AffectedDeps;
  /** Policy id -> the object keys (without section) it targeted when last published. */
  private readonly policyTargets = new Map<string, string[]>();
  constructor(deps: AffectedDeps) {
    this.deps = deps;
  }

  /**
   * `<Kind>Affected` on the Gateways and routes that the `ids` policies target or targeted (all
   * targets when undefined): merged into their status without touching other writers' conditions;
   * removed where no policy of the kind is attached any more. Returns the targets whose write failed.
   */
  async publish(ids: string[] | undefined): Promise<{ item: string; failure: PublishFailure }[]> {
    const { engine, kind: k } = this.deps;
    const targets = new Set<string>();
    const base = (key: string) => key.split('#')[0]!;
    const list = ids ?? [...new Set([...engine.policyIds(), ...this.policyTargets.keys()])];
    for (const id of list) {
      if (!id.startsWith(`${k.kind}:`)) continue;
      for (const t of this.policyTargets.get(id) ?? []) targets.add(t);
      const direct = (engine.policy(id)?.policy?.targets ?? []).map((t) => base(t.key));
      // routes below a gateway (or listener, or class) target inherit its policy: they are targets too
      const now = [...new Set(direct)];
      for (const t of direct)
        if (!/^(HTTPRoute|GRPCRoute):/.test(t)) for (const r of engine.topology.routesThrough(t)) now.push(r);
      if (now.length) this.policyTargets.set(id, [...new Set(now)]);
      else this.policyTargets.delete(id);
      for (const t of now) targets.add(t);
    }
    const type = `${k.kind}Affected`;
    const nowTime = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const what = (key: string) => ({ object: `${type} on ${key}`, policies: () => [] });
    return this.deps.ledger.each(targets, this.deps.writeConcurrency, what, async (key) => {
      const colon = key.indexOf(':');
      const kind = key.slice(0, colon);
      const [ns, name] = key.slice(colon + 1).split('/') as [string, string];
      if (kind === 'Gateway') await this.gateway(key, ns, name, type, nowTime);
      else if (kind === 'HTTPRoute' || kind === 'GRPCRoute')
        await this.route(key, kind, ns, name, type, nowTime);
    });
  }

  private conditionFor(
    key: string,
    sections: string[],
    generation: number | undefined,
  ): StatusCondition | undefined {
    const attached =
      this.deps.engine.attachedAt(key).length > 0 ||
      sections.some((s) => this.deps.engine.attachedAt(`${key}#${s}`).length > 0);
    const cond = affectedCondition(this.deps.engine, key, sections);
    // nothing attached and nothing inherited: no condition of ours at all (removed if we had one)
    if (!attached && cond.status !== 'True') return undefined;
    return { ...cond, observedGeneration: generation ?? 0 };
  }

  private async gateway(key: string, ns: string, name: string, type: string, now: string): Promise<void> {
    const informer = this.deps.informers.find((i) => i.path.endsWith('/gateways'))!;
    const live = informer.cache.get(`${ns}/${name}`);
    if (!live) return;
    const gw = this.deps.engine.topology.gateways.get(gatewayKey(ns, name));
    const cond = this.conditionFor(key, gw?.listeners.map((l) => l.name) ?? [], live.metadata.generation);
    const current = ((live.status as { conditions?: StatusCondition[] } | undefined)?.conditions ?? []).find(
      (x) => x.type === type,
    );
    if ((!cond && !current) || (cond && current && sameStatusCondition(cond, current))) {
      this.deps.skipped.inc();
      return;
    }
    // status.conditions is a map keyed by type: applying our one condition merges with the others';
    // applying none removes ours.
    const conditions = cond ? mergeCondition(current ? [current] : [], cond, type, now) : [];
    const applied = await this.deps.client.apply(
      `${GW}/namespaces/${ns}/gateways/${name}/status`,
      {
        apiVersion: 'gateway.networking.k8s.io/v1',
        kind: 'Gateway',
        metadata: { name, namespace: ns },
        status: { conditions },
      },
      `${this.deps.name}-affected`,
    );
    informer.cache.set(`${ns}/${name}`, applied);
    this.deps.writes.inc();
  }

  private async route(
    key: string,
    kind: string,
    ns: string,
    name: string,
    type: string,
    now: string,
  ): Promise<void> {
    const plural = kind === 'HTTPRoute' ? 'httproutes' : 'grpcroutes';
    const informer = this.deps.informers.find((i) => i.path.endsWith(`/${plural}`))!;
    let live = informer.cache.get(`${ns}/${name}`);
    const route = this.deps.engine.topology.routes.get(key);
    const sections = (route?.rules ?? []).map((r, i) => ruleName(r, i));
    // status.parents is an atomic list: read-modify-write with optimistic concurrency.
    for (let attempt = 0; live && attempt < 5; attempt++) {
      const cond = this.conditionFor(key, sections, live.metadata.generation);
      const parentRefs = ((live.spec as { parentRefs?: RouteParentRef[] } | undefined)?.parentRefs ??
        []) as RouteParentRef[];
      const merged = mergeRouteAffected(live.status as never, ns, parentRefs, type, cond, now);
      if (!merged) {
        this.deps.skipped.inc();
        return;
      }
      try {
        const updated = await this.deps.client.request<KubeObject>(
          'PUT',
          `${GW}/namespaces/${ns}/${plural}/${name}/status`,
          { ...live, status: { ...(live.status as object), parents: merged.parents } },
        );
        informer.cache.set(`${ns}/${name}`, updated);
        this.deps.writes.inc();
        return;
      } catch (e) {
        if (!(e instanceof ApiError) || e.status !== 409) throw e;
        live = await this.deps.client
          .request<KubeObject>('GET', `${GW}/namespaces/${ns}/${plural}/${name}`)
          .catch(() => undefined);
      }
    }
  }
}
