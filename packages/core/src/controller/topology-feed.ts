// Gateway API topology events (GatewayClass, Gateway, HTTPRoute, GRPCRoute, Namespace) into the
// engine. Status-only updates (ours: <Kind>Affected; the gateway's own) change neither the spec
// (generation) nor the labels nor the uid: they are recognised and cost nothing.

import type { KubeObject } from '../kube/client.ts';
import type { InformerEvent } from '../kube/informer.ts';
import type { Logger } from '../kube/logging.ts';
import type { PolicyEngine } from '../merge/engine.ts';
import { convertTopology } from '../topology/from-k8s.ts';

export const GW = '/apis/gateway.networking.k8s.io/v1';

/** The topology resources a policy controller watches: list path, kind, and scope (--watch-namespace narrows the namespaced ones). */
export const TOPOLOGY_RESOURCES = [
  [`${GW}/gatewayclasses`, 'GatewayClass', 'cluster'],
  [`${GW}/gateways`, 'Gateway', 'namespaced'],
  [`${GW}/httproutes`, 'HTTPRoute', 'namespaced'],
  [`${GW}/grpcroutes`, 'GRPCRoute', 'namespaced'],
  ['/api/v1/namespaces', 'Namespace', 'cluster'],
] as const;

export class TopologyFeed {
  private readonly engine: PolicyEngine;
  private readonly log: Logger;
  /** Topology object -> uid|generation|labels last applied to the engine. */
  private readonly seen = new Map<string, string>();
  constructor(engine: PolicyEngine, log: Logger) {
    this.engine = engine;
    this.log = log;
  }

  /** Applies one event to the engine; false when it changes nothing the engine reads. */
  apply(type: InformerEvent, o: KubeObject, kind: string): boolean {
    const ns = o.metadata.namespace ?? 'default';
    const id = `${kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
    const sig = `${o.metadata.uid}|${o.metadata.generation ?? ''}|${JSON.stringify(o.metadata.labels ?? {})}`;
    if (type === 'DELETED') this.seen.delete(id);
    else if (this.seen.get(id) === sig) return false;
    else this.seen.set(id, sig);
    if (type === 'DELETED') {
      if (kind === 'Gateway') this.engine.removeGateway(ns, o.metadata.name);
      else if (kind === 'GatewayClass') this.engine.removeGatewayClass(o.metadata.name);
      else if (kind === 'HTTPRoute' || kind === 'GRPCRoute')
        this.engine.removeRoute(kind, ns, o.metadata.name);
      return true;
    }
    const conv = convertTopology({ kind, metadata: o.metadata, spec: o.spec });
    if (conv && !('error' in conv)) {
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
    return true;
  }
}
