// What a policy kind's controller knows of the data-plane wiring (the wiring-controller's objects):
// which gateways have a WasmPlugin or an EnvoyExtensionPolicy written for them, and whether the
// provider reports it accepted. Read-only informers on the providers' resources (optional: a
// provider whose CRDs are not served counts as writing nothing). With it, Enforced is claimed only
// for policies whose every gateway is wired: "Enforced means something enforces".
import { labelValue } from '../effective/names.ts';
import { gatewayKey } from '../topology/types.ts';
import { PROVIDER_RESOURCES } from '../wiring/providers.ts';
import type { KubeClient, KubeObject } from './client.ts';
import { Informer } from './informer.ts';

export const WIRING_LABEL_KEY = 'cascade.dev/wiring';
/** On a gateway's wiring object: its configuration denies every request (nothing fitted), and why. */
export const FAILED_CLOSED_ANNOTATION = 'cascade.dev/failed-closed';

/** The resources that carry a gateway's configuration (not the cluster patches beside them). */
const CARRIERS = [PROVIDER_RESOURCES.istio[0]!, PROVIDER_RESOURCES['envoy-gateway'][0]!];

/** Why a live wiring object is not in force, as its provider reports it (undefined: nothing reported against it). */
function refusedByProvider(o: KubeObject): string | undefined {
  // Envoy Gateway (Gateway API policy status): status.ancestors[].conditions Accepted
  const ancestors = (
    o.status as
      | { ancestors?: { conditions?: { type: string; status: string; message?: string }[] }[] }
      | undefined
  )?.ancestors;
  for (const a of ancestors ?? [])
    for (const c of a.conditions ?? [])
      if (c.type === 'Accepted' && c.status === 'False') return (c.message ?? 'not accepted').slice(0, 200);
  return undefined;
}

export class WiringState {
  readonly informers: Informer[];
  constructor(client: KubeClient, onChange: () => void, watchNamespaces?: readonly string[]) {
    this.informers = CARRIERS.map(
      (r) =>
        new Informer(
          client,
          `/apis/${r.group}/${r.version}/${r.plural}?labelSelector=${encodeURIComponent(WIRING_LABEL_KEY)}`,
          () => onChange(),
          undefined,
          true,
          watchNamespaces,
        ),
    );
    for (const i of this.informers) i.onServed = () => onChange();
  }

  /** Why `gw` (`ns/name`) is not wired (undefined: it is). */
  gap(gw: string): string | undefined {
    const [ns, name] = gw.split('/') as [string, string];
    if (this.informers.every((i) => i.missing))
      return `gateway ${gw} is not wired to its data plane: neither Istio's WasmPlugin nor Envoy Gateway's EnvoyExtensionPolicy is served (install the provider's CRDs)`;
    let found: KubeObject | undefined;
    for (const i of this.informers)
      for (const o of i.cache.values())
        if (
          o.metadata.namespace === ns &&
          o.metadata.labels?.['cascade.dev/gateway'] === labelValue(name) &&
          o.metadata.annotations?.['cascade.dev/gateway'] === gw
        )
          found = o;
    if (!found)
      return `gateway ${gw} is not wired to its data plane: no WasmPlugin or EnvoyExtensionPolicy has been written for it (is the wiring-controller running, and is its GatewayClass run by Istio or Envoy Gateway?)`;
    const failedClosed = found.metadata.annotations?.[FAILED_CLOSED_ANNOTATION];
    if (failedClosed) return `gateway ${gw}: ${failedClosed.slice(0, 300)}`;
    const refused = refusedByProvider(found);
    if (refused)
      return `gateway ${gw}: the provider does not accept its wasm-shim configuration (${refused})`;
    return undefined;
  }
}

/** The gateways (`ns/name`) whose paths carry rules of each policy (`Kind:ns/name`). */
export function gatewaysByPolicy(engine: {
  topology: {
    gateways: Map<string, { namespace: string; name: string }>;
    pathsThrough(k: string): Iterable<string>;
  };
  result(pk: string): { sources: { kind: string; namespace: string; name: string }[] } | undefined;
}): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const gw of engine.topology.gateways.values()) {
    const g = `${gw.namespace}/${gw.name}`;
    for (const pk of engine.topology.pathsThrough(gatewayKey(gw.namespace, gw.name)))
      for (const s of engine.result(pk)?.sources ?? []) {
        const id = `${s.kind}:${s.namespace}/${s.name}`;
        let set = out.get(id);
        if (!set) out.set(id, (set = new Set()));
        set.add(g);
      }
  }
  return out;
}

/**
 * Enforced=True becomes False with `reason` when a gateway the policy reaches has a gap: not wired
 * (MissingDependency), not programmed by its controller (TargetNotProgrammed, gateway-readiness.ts).
 */
export function withGatewayGaps<C extends { type: string; status: string; reason: string; message: string }>(
  conds: C[],
  gaps: readonly string[],
  reason: 'MissingDependency' | 'TargetNotProgrammed',
): C[] {
  if (!gaps.length) return conds;
  const shown =
    gaps.slice(0, 3).join('; ') + (gaps.length > 3 ? `; and ${gaps.length - 3} more gateways` : '');
  return conds.map((c) =>
    c.type === 'Enforced' && c.status === 'True'
      ? { ...c, status: 'False', reason, message: `Policy is not enforced: ${shown}` }
      : c,
  );
}
