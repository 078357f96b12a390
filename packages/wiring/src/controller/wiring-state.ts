// What a policy kind's controller knows of the data-plane wiring (the wiring-controller's objects):
// which gateways have a WasmPlugin or an EnvoyExtensionPolicy written for them, and whether the
// provider reports it accepted. Read-only informers on the providers' resources (optional: a
// provider whose CRDs are not served counts as writing nothing). With it, Enforced is claimed only
// for policies whose every gateway is wired: "Enforced means something enforces".

import type { DataPlaneGaps, DataPlaneSource, OwnedCollection } from '@cascade/core';
import { labelValue } from '@cascade/core';
import { Informer, type KubeClient, type KubeObject } from '@cascade/core/kube';
import { PROVIDER_RESOURCES, wiringListPath } from '../providers/providers.ts';
import { DecisionPoint, type DecisionPointName } from './decision-point.ts';
import { WIRING_CARRIERS } from './rbac.ts';

/** Every CRD the providers need, by name and version (what a missing-provider message names). */
const CRD_NAMES = Object.entries(PROVIDER_RESOURCES)
  .map(([p, rs]) => `${p}: ${rs.map((r) => `${r.plural}.${r.group} ${r.version}`).join(', ')}`)
  .join('; ');

/** On a gateway's wiring object: its configuration denies every request (nothing fitted), and why. */
export const FAILED_CLOSED_ANNOTATION = 'cascade.dev/failed-closed';
/**
 * On a gateway's wiring object: the routes refused for the size budget (`<Kind>/<ns>/<name>`,
 * comma-separated), whose policies are denied instead of enforced; `*` when the list would be too
 * long to hold (then every route of the gateway counts as refused: Enforced is never over-claimed).
 */
export const REFUSED_ROUTES_ANNOTATION = 'cascade.dev/refused-routes';
/** Longest list the annotation holds (characters). */
const MAX_REFUSED_ROUTES = 32_768;

/** The annotation's value for these refused routes (undefined: none). */
export function refusedRoutesAnnotation(routes: Iterable<string>): string | undefined {
  const list = [...new Set(routes)].sort();
  if (!list.length) return undefined;
  const text = list.join(',');
  return text.length <= MAX_REFUSED_ROUTES ? text : '*';
}

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

export class WiringState implements DataPlaneGaps {
  readonly informers: Informer[];
  /** The informers of the wiring's carriers (WIRING_CARRIERS, in order). */
  private readonly carriers: Informer[];
  private readonly decisionPoint: DecisionPoint | undefined;
  constructor(
    client: KubeClient,
    onChange: () => void,
    watchNamespaces?: readonly string[],
    decisionPoint?: { which: DecisionPointName; settings?: Readonly<Record<string, string>> },
  ) {
    this.carriers = WIRING_CARRIERS.map(
      (r) => new Informer(client, wiringListPath(r), () => onChange(), undefined, true, watchNamespaces),
    );
    for (const i of this.carriers) i.onServed = () => onChange();
    this.decisionPoint =
      decisionPoint && new DecisionPoint(client, onChange, decisionPoint.which, decisionPoint.settings);
    this.informers = [...this.carriers, ...(this.decisionPoint?.informers ?? [])];
  }

  backendGap(): string | undefined {
    return this.decisionPoint?.gap();
  }

  failureMode(): string | undefined {
    return this.decisionPoint?.failureMode();
  }

  /**
   * Why `gw` (`ns/name`) is not wired (undefined: it is), for a policy whose rules reach `routes`
   * (`<Kind>/<ns>/<name>`) there: one of them refused for size counts too.
   */
  gap(gw: string, routes?: ReadonlySet<string>): string | undefined {
    const [ns, name] = gw.split('/') as [string, string];
    if (this.carriers.every((i) => i.missing))
      return `gateway ${gw} is not wired to its data plane: neither Istio's WasmPlugin nor Envoy Gateway's EnvoyExtensionPolicy is served (install the provider's CRDs: ${CRD_NAMES})`;
    // every object carrying the gateway's configuration: one, or an Istio gateway's shards
    const found: KubeObject[] = [];
    for (const i of this.carriers)
      for (const o of i.cache.values())
        if (
          o.metadata.namespace === ns &&
          o.metadata.labels?.['cascade.dev/gateway'] === labelValue(name) &&
          o.metadata.annotations?.['cascade.dev/gateway'] === gw
        )
          found.push(o);
    if (!found.length)
      return `gateway ${gw} is not wired to its data plane: no WasmPlugin or EnvoyExtensionPolicy has been written for it (is the wiring-controller running, and is its GatewayClass run by Istio or Envoy Gateway?)`;
    const annotated = (a: string) => found.map((o) => o.metadata.annotations?.[a]).find(Boolean);
    const failedClosed = annotated(FAILED_CLOSED_ANNOTATION);
    if (failedClosed) return `gateway ${gw}: ${failedClosed.slice(0, 300)}`;
    const refusedList = annotated(REFUSED_ROUTES_ANNOTATION);
    if (refusedList && routes?.size) {
      const all = refusedList === '*';
      const mine = all ? [...routes] : refusedList.split(',').filter((r) => routes.has(r));
      if (mine.length)
        return `gateway ${gw}: ${all ? 'routes' : `route${mine.length > 1 ? 's' : ''} ${mine.slice(0, 3).join(', ')}${mine.length > 3 ? ` and ${mine.length - 3} more` : ''}`} refused by the gateway wiring's size budget (see the WiringRefused Events): their requests are denied, not enforced`;
    }
    const refused = found.map(refusedByProvider).find(Boolean);
    if (refused)
      return `gateway ${gw}: the provider does not accept its wasm-shim configuration (${refused})`;
    return undefined;
  }
}

/** The policy controllers' view of the wiring (core's DataPlaneSource), the gateways only. */
export const wiringGaps: DataPlaneSource = (client, onChange, watchNamespaces) =>
  new WiringState(client, onChange, watchNamespaces);

/**
 * What a gateway kind's binary hands its controller: the wiring and the decision point its rules
 * need (`which`), at the address and failure mode its settings give (decisionPointFlags).
 */
export const wiringGapsFor =
  (which: DecisionPointName): DataPlaneSource =>
  (client, onChange, watchNamespaces, settings) =>
    new WiringState(client, onChange, watchNamespaces, { which, ...(settings ? { settings } : {}) });

/** Every object the wiring-controller writes, found by its label (for `cascadectl cleanup`). */
export const WIRING_COLLECTIONS: readonly OwnedCollection[] = Object.values(PROVIDER_RESOURCES)
  .flat()
  .map((r) => ({
    what: r.kind,
    path: wiringListPath(r),
  }));
