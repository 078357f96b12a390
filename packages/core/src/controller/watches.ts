// What a policy controller watches and how each event reaches the reconcile: the Gateway API topology
// (into the engine through the TopologyFeed), the kind's policies, ReferenceGrants, the kind's rendered
// objects and the controller's own EffectivePolicies. Each event names the work it makes pending
// (a route, a gateway, a policy, a rendered object, an EffectivePolicy) and wakes the sync lane; the
// reconcile (controller.ts) decides what to write. With --watch-namespace the namespaced resources are
// watched in those namespaces only.
import { EFFECTIVE_GROUP, MANAGED_BY } from '../effective/effective-policy.ts';
import type { PolicyKind } from '../kind.ts';
import type { KubeClient } from '../kube/client.ts';
import { Informer } from '../kube/informer.ts';
import type { Logger } from '../kube/logging.ts';
import type { PolicyEngine } from '../merge/engine.ts';
import { routeKey } from '../topology/types.ts';
import type { ControllerOptions } from './controller.ts';
import { programmedSignature } from './gateway-readiness.ts';
import { type RenderInformer, renderInformers } from './rendered.ts';
import { TOPOLOGY_RESOURCES, TopologyFeed } from './topology-feed.ts';

/** Where each kind of event leaves its work. */
export interface WatchSinks {
  /** a route changed (its EffectivePolicy, and the rendering of its gateways) */
  route(routeKey: string): void;
  /** a gateway's rendering may have changed (`ns/name`) */
  gateway(key: string): void;
  /** a policy's status must be checked (`Kind:ns/name`) */
  policy(id: string): void;
  /** a rendered object changed under us (`ns/name`) */
  rendered(key: string): void;
  /** one of our EffectivePolicies changed under us (`ns/name`) */
  effective(key: string): void;
  /** a gateway's Accepted/Programmed status moved (a status-only change the engine does not read) */
  gatewayStatus(): void;
  /** wake the sync lane */
  changed(): void;
}

export interface ControllerWatches {
  /** every informer, the four below included */
  informers: Informer[];
  policies: Informer;
  grants: Informer;
  effective: Informer;
  renderInformers: Map<string, RenderInformer>;
}

export function controllerWatches(
  opts: ControllerOptions,
  engine: PolicyEngine,
  log: Logger,
  sink: WatchSinks,
): ControllerWatches {
  const c = opts.client;
  const scope = opts.watchNamespaces;
  const informers: Informer[] = [];
  const feed = new TopologyFeed(engine, log);
  /** Gateway ns/name -> what of its status Enforced reads (see gateway-readiness.ts). */
  const programmed = new Map<string, string>();
  for (const [path, kind, scoped] of TOPOLOGY_RESOURCES)
    informers.push(
      new Informer(
        c,
        path,
        (type, o) => {
          if (kind === 'Gateway' && opts.requireReady) {
            const gw = `${o.metadata.namespace ?? 'default'}/${o.metadata.name}`;
            const sig = type === 'DELETED' ? undefined : programmedSignature(o);
            if (programmed.get(gw) !== sig) {
              if (sig === undefined) programmed.delete(gw);
              else programmed.set(gw, sig);
              sink.gatewayStatus();
              sink.changed();
            }
          }
          if (!feed.apply(type, o, kind)) return;
          // A route event always re-checks its EffectivePolicy (a new uid must reach the owner
          // reference) and the rendering of its gateways (hostnames); a gateway event its rendering.
          if (kind === 'HTTPRoute' || kind === 'GRPCRoute')
            sink.route(routeKey(kind, o.metadata.namespace ?? 'default', o.metadata.name));
          else if (kind === 'Gateway')
            sink.gateway(`${o.metadata.namespace ?? 'default'}/${o.metadata.name}`);
          sink.changed();
        },
        undefined,
        false,
        scoped === 'namespaced' ? scope : undefined,
      ),
    );
  const k = opts.kind;
  const policies = policyInformer(
    c,
    k,
    engine,
    (id) => {
      // Status carries observedGeneration: every event re-checks this policy's status.
      sink.policy(id);
      sink.changed();
    },
    scope,
  );
  const grants = new Informer(
    c,
    '/apis/gateway.networking.k8s.io/v1beta1/referencegrants',
    () => {
      // A grant can change any gateway's rendering (cross-namespace references).
      for (const gw of engine.topology.gateways.values()) sink.gateway(`${gw.namespace}/${gw.name}`);
      sink.changed();
    },
    undefined,
    true,
    scope,
  );
  informers.push(grants);
  const rendered = renderInformers(
    c,
    opts.kind,
    opts.name,
    opts.settings ?? {},
    (key) => {
      sink.rendered(key);
      sink.changed();
    },
    scope,
  );
  for (const [res, { informer }] of rendered) {
    // Installed after the controller (an enforcement component, a data-plane provider), or removed: every gateway's
    // rendered objects are published again at once, not at the next unrelated change.
    informer.onServed = (served) => {
      log(
        'info',
        served
          ? 'rendered resource now served: rendering every gateway'
          : 'rendered resource no longer served',
        {
          resource: res,
        },
      );
      for (const gw of engine.topology.gateways.values()) sink.gateway(`${gw.namespace}/${gw.name}`);
      sink.changed();
    };
    informers.push(informer);
  }
  const effective = new Informer(
    c,
    `/apis/${EFFECTIVE_GROUP}/v1alpha1/effectivepolicies?labelSelector=${encodeURIComponent(`${MANAGED_BY}=${opts.name}`)}`,
    (_t, o) => {
      sink.effective(`${o.metadata.namespace}/${o.metadata.name}`);
      sink.changed();
    },
    undefined,
    false,
    scope,
  );
  informers.push(policies, effective);
  return { informers, policies, grants, effective, renderInformers: rendered };
}

/** An informer of one kind's policies feeding `engine`; `onEvent` gets the policy's id (`Kind:ns/name`). */
export function policyInformer(
  client: KubeClient,
  k: PolicyKind,
  engine: PolicyEngine,
  onEvent: (id: string) => void,
  scope?: readonly string[],
): Informer {
  return new Informer(
    client,
    `/apis/${k.group}/${k.version}/${k.plural}`,
    (type, o) => {
      const ns = o.metadata.namespace ?? 'default';
      if (type === 'DELETED') engine.removePolicy(k.kind, ns, o.metadata.name);
      else
        engine.upsertPolicy({
          apiVersion: o.apiVersion,
          kind: k.kind,
          metadata: { ...o.metadata, namespace: ns },
          spec: o.spec,
        } as never);
      onEvent(`${k.kind}:${ns}/${o.metadata.name}`);
    },
    undefined,
    false,
    scope,
  );
}
