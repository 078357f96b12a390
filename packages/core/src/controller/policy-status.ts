// Status conditions on the policies of a kind: computed from the engine, the publish ledger and the
// consumers' readiness; written by server-side apply only where they differ from the live ones
// (lastTransitionTime kept while status and reason stay).
import { isEqual } from 'lodash-es';
import { postWarningEvent } from '../kube/events.ts';
import type { Informer } from '../kube/informer.ts';
import { type Condition, policyConditions } from '../status/conditions.ts';
import { type EnforcedFacts, withEnforcement } from '../status/enforced.ts';
import { gatewayKey } from '../topology/types.ts';
import type { DataPlaneGaps } from './data-plane.ts';
import type { PublishFailure, WriterDeps } from './publish.ts';
import type { RenderedPublisher } from './rendered.ts';

export interface PolicyStatusDeps extends WriterDeps {
  policies: Informer;
  renderer: RenderedPublisher;
  /** The data plane the kind's policies need to be Enforced (undefined: not required). */
  dataPlane?: DataPlaneGaps;
  /** Why a gateway (`ns/name`) is not programmed (undefined: it is, or it is not required). */
  gatewayGap?: (gw: string) => string | undefined;
  /** Why the kind's aggregate object (an operator's resource) does not carry its rules yet (--require-ready). */
  aggregateGap?: () => { object: string; missing: boolean; why: string } | undefined;
}

type LiveCondition = Condition & { lastTransitionTime?: string };

/** Enforced reasons a Warning Event is posted for when a policy enters them (not Pending: every change passes through it for a moment). */
const WARNED_REASONS = new Set(['MissingDependency', 'TargetNotProgrammed', 'FailedClosed']);

export class PolicyStatusWriter {
  private readonly deps: PolicyStatusDeps;
  constructor(deps: PolicyStatusDeps) {
    this.deps = deps;
  }

  /**
   * Status of `ids` (policy ids; all when undefined), written only where the conditions differ.
   * Returns the policies (`ns/name`) whose write failed.
   */
  async publish(ids: string[] | undefined): Promise<{ item: string; failure: PublishFailure }[]> {
    const { kind: k, policies, ledger } = this.deps;
    this.reach = undefined; // gateways by policy: computed once per pass, when first needed
    const keys =
      ids === undefined
        ? [...policies.cache.keys()]
        : ids.filter((id) => id.startsWith(`${k.kind}:`)).map((id) => id.slice(k.kind.length + 1));
    const what = (key: string) => ({ object: `${k.kind} ${key} status`, policies: () => [] });
    return ledger.each(keys, this.deps.writeConcurrency, what, (key) => this.one(key));
  }

  private reach?: Map<string, Map<string, Set<string>>>;

  /** What `gap` says of each gateway a policy reaches (with its routes there), sorted, the gateways without a gap left out. */
  private gaps(
    id: string,
    gap: ((gw: string, routes: ReadonlySet<string>) => string | undefined) | undefined,
  ): string[] {
    if (!gap) return [];
    this.reach ??= gatewaysByPolicy(this.deps.engine);
    return [...(this.reach.get(id) ?? new Map<string, Set<string>>())]
      .sort((a, b) => (a[0] < b[0] ? -1 : 1))
      .map(([gw, routes]) => gap(gw, routes))
      .filter((g): g is string => g !== undefined);
  }

  /** Whether the policy's rules reach any gateway. */
  private reachesGateway(id: string): boolean {
    this.reach ??= gatewaysByPolicy(this.deps.engine);
    return (this.reach.get(id)?.size ?? 0) > 0;
  }

  /** The data plane's service and failure mode, for a policy whose rules reach a gateway. */
  private backendFacts(id: string, dataPlane: DataPlaneGaps | undefined): Partial<EnforcedFacts> {
    if (!dataPlane || !this.reachesGateway(id)) return {};
    const backendGap = dataPlane.backendGap?.();
    const failureMode = dataPlane.failureMode?.();
    return { ...(backendGap ? { backendGap } : {}), ...(failureMode ? { failureMode } : {}) };
  }

  /** The aggregate object's gap, for a policy that reaches a gateway (its rules are in that object). */
  private aggregateWaiting(id: string): { object: string; missing: boolean; why: string }[] {
    const gap = this.deps.aggregateGap?.();
    return gap && this.reachesGateway(id) ? [gap] : [];
  }

  private async one(key: string): Promise<void> {
    const { kind: k, policies, renderer, ledger } = this.deps;
    const live = policies.cache.get(key);
    if (!live) return; // deleted meanwhile: nothing to write
    const [ns, name] = key.split('/') as [string, string];
    const id = `${k.kind}:${ns}/${name}`;
    const liveConds = (live.status as { conditions?: LiveCondition[] } | undefined)?.conditions ?? [];
    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const dataPlane = this.deps.dataPlane;
    // the ladder (status/enforced.ts): its own objects, then the data plane, then the gateway
    const conds = withEnforcement(policyConditions(this.deps.engine, id), {
      publishFailures: [...renderer.refusalsFor(id), ...ledger.forPolicy(id)],
      waiting: [...renderer.waitingFor(id), ...this.aggregateWaiting(id)],
      dataPlaneGaps: this.gaps(id, dataPlane && ((gw, routes) => dataPlane.gap(gw, routes))),
      gatewayGaps: this.gaps(id, this.deps.gatewayGap),
      ...this.backendFacts(id, dataPlane),
    }).map((cnd) => {
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
      this.deps.skipped.inc();
      return;
    }
    const applied = await this.deps.client.apply(
      `/apis/${k.group}/${k.version}/namespaces/${ns}/${k.plural}/${name}/status`,
      {
        apiVersion: `${k.group}/${k.version}`,
        kind: k.kind,
        metadata: { name, namespace: ns },
        status: { conditions: conds },
      },
      this.deps.name,
    );
    policies.cache.set(key, applied);
    this.deps.writes.inc();
    // a Warning Event when the policy stops being enforced for want of its data plane, or closes the
    // routes it names (an invalid policy of a fail-closed kind, or a valid one whose routes it closes)
    const enforced = conds.find((c) => c.type === 'Enforced');
    const before = liveConds.find((c) => c.type === 'Enforced');
    const warn = enforced !== undefined && WARNED_REASONS.has(enforced.reason);
    if (warn && before?.reason !== enforced.reason)
      void postWarningEvent(
        this.deps.client,
        { apiVersion: `${k.group}/${k.version}`, kind: k.kind, namespace: ns, name },
        enforced.reason,
        enforced.message.slice(0, 1000),
        { component: this.deps.name },
      ).catch(() => undefined);
  }
}

/** For each policy (`Kind:ns/name`), the gateways (`ns/name`) whose paths carry its rules, with the routes there (`<Kind>/<ns>/<name>`). */
export function gatewaysByPolicy(engine: {
  topology: {
    gateways: Map<string, { namespace: string; name: string }>;
    pathsThrough(k: string): Iterable<string>;
    paths: Map<string, { route: { kind: string; namespace: string; name: string } }>;
  };
  result(pk: string): { sources: { kind: string; namespace: string; name: string }[] } | undefined;
}): Map<string, Map<string, Set<string>>> {
  const out = new Map<string, Map<string, Set<string>>>();
  for (const gw of engine.topology.gateways.values()) {
    const g = `${gw.namespace}/${gw.name}`;
    for (const pk of engine.topology.pathsThrough(gatewayKey(gw.namespace, gw.name))) {
      const r = engine.topology.paths.get(pk)?.route;
      for (const s of engine.result(pk)?.sources ?? []) {
        const id = `${s.kind}:${s.namespace}/${s.name}`;
        let byGw = out.get(id);
        if (!byGw) out.set(id, (byGw = new Map()));
        let routes = byGw.get(g);
        if (!routes) byGw.set(g, (routes = new Set()));
        if (r) routes.add(`${r.kind}/${r.namespace}/${r.name}`);
      }
    }
  }
  return out;
}
