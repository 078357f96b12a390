// The seam between a policy kind's controller and the gateways' data plane: a kind that contributes
// data-plane actions (PolicyKind.actions) is Enforced only where the data plane carries them. Core
// knows nothing of the data plane; the binary hands the controller a source (@cascade/wiring's
// `wiringGaps` reads the wiring-controller's objects) and the status ladder asks it per gateway.
import type { KubeClient } from '../kube/client.ts';
import type { Informer } from '../kube/informer.ts';

/** What a controller knows of the data plane: why a gateway's wiring does not carry a policy. */
export interface DataPlaneGaps {
  /** The informers it reads (run, health-checked and counted with the controller's own). */
  readonly informers: readonly Informer[];
  /**
   * Why gateway `gw` (`ns/name`) does not carry a policy whose rules reach `routes`
   * (`<Kind>/<ns>/<name>`) there, in one sentence naming the gateway; undefined: it does.
   */
  gap(gw: string, routes?: ReadonlySet<string>): string | undefined;
  /**
   * Why the service the data plane calls for this kind's rules (its decision point) cannot answer,
   * in one sentence naming it; undefined: it has ready endpoints, or nothing is known of it.
   */
  backendGap?(): string | undefined;
  /** What the data plane does when that service cannot answer, in one sentence (the failure mode). */
  failureMode?(): string | undefined;
}

/**
 * Builds the data plane's view for one controller; `onChange` is called when any gateway's answer
 * may have moved. `settings` are the binary's setting flags (where the data plane's service is).
 */
export type DataPlaneSource = (
  client: KubeClient,
  onChange: () => void,
  watchNamespaces?: readonly string[],
  settings?: Readonly<Record<string, string>>,
) => DataPlaneGaps;
