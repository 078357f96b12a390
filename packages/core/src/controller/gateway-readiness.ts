// Whether a Gateway a policy reaches is run by a controller: Accepted and Programmed, as its
// controller reports them in the Gateway's status. A policy is Enforced only
// where something enforces it; a Gateway nobody programmed (no controller for its class, a listener
// refused, the CRD's own "Pending" defaults) enforces nothing. Kuadrant holds Enforced the same way.
import type { KubeObject } from '../kube/client.ts';

interface GatewayCondition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  observedGeneration?: number;
}

const conditionsOf = (o: KubeObject): GatewayCondition[] =>
  (o.status as { conditions?: GatewayCondition[] } | undefined)?.conditions ?? [];

/** Why the live Gateway `gw` (`ns/name`) does not carry policy into force (undefined: it does). */
export function gatewayNotProgrammed(live: KubeObject | undefined, gw: string): string | undefined {
  if (!live) return undefined; // gone: no path reaches it any more
  const conds = conditionsOf(live);
  const accepted = conds.find((c) => c.type === 'Accepted');
  const programmed = conds.find((c) => c.type === 'Programmed');
  const said = (c: GatewayCondition) =>
    `${c.type}=${c.status}${c.reason ? ` ${c.reason}` : ''}${c.message ? `: ${c.message.slice(0, 160)}` : ''}`;
  if (accepted?.status === 'False')
    return `gateway ${gw} is not accepted by its controller (${said(accepted)})`;
  if (!programmed) return `gateway ${gw} has not been programmed by any controller (no Programmed condition)`;
  if (programmed.status === 'Unknown' || accepted?.status === 'Unknown')
    return `gateway ${gw} has not been programmed by any controller (${said(programmed.status === 'Unknown' ? programmed : accepted!)})`;
  if (programmed.status !== 'True') return `gateway ${gw} is not programmed (${said(programmed)})`;
  const gen = live.metadata.generation;
  if (gen !== undefined && programmed.observedGeneration !== undefined && programmed.observedGeneration < gen)
    return `gateway ${gw} is programmed for generation ${programmed.observedGeneration}, not yet for ${gen}`;
  return undefined;
}

/** What of a Gateway's status gatewayNotProgrammed reads, to see a status-only change that matters. */
export function programmedSignature(o: KubeObject): string {
  return JSON.stringify([
    o.metadata.generation,
    conditionsOf(o)
      .filter((c) => c.type === 'Accepted' || c.type === 'Programmed')
      .map((c) => [c.type, c.status, c.reason, c.observedGeneration]),
  ]);
}
