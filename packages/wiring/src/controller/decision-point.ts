// The service a gateway's wasm-shim calls for a kind's rules (Authorino for auth, Limitador for rate
// limits): a policy is Enforced only while that Service has a ready endpoint, and its status says what
// requests get when the service cannot answer (the failure mode). The kind binaries take the address
// and the failure mode as flags (the chart passes the wiring-controller's own values), and read the
// Service's EndpointSlices, in its namespace only, by the kubernetes.io/service-name label.
import type { SettingFlag } from '@cascade/core';
import { Informer, type KubeClient } from '@cascade/core/kube';
import { DEFAULT_PROVIDERS } from '../providers/providers.ts';
import { DEFAULT_WIRING } from '../shim/wasm.ts';

/** The decision points the wasm-shim calls, by the service it names in its configuration. */
export const DECISION_POINTS = {
  auth: {
    title: 'Authorino',
    address: `${DEFAULT_PROVIDERS.authorino.host}:${DEFAULT_PROVIDERS.authorino.port}`,
    failureMode: DEFAULT_WIRING.authFailureMode,
  },
  ratelimit: {
    title: 'Limitador',
    address: `${DEFAULT_PROVIDERS.limitador.host}:${DEFAULT_PROVIDERS.limitador.port}`,
    failureMode: DEFAULT_WIRING.rateLimitFailureMode,
  },
} as const;
export type DecisionPointName = keyof typeof DECISION_POINTS;

/** Setting keys the flags fill (the controller's settings, handed to the DataPlaneSource). */
const KEYS = { address: 'dataPlaneService', mode: 'dataPlaneFailureMode' };

/** A gateway kind binary's flags for its decision point (runPolicyController's setting flags). */
export function decisionPointFlags(which: DecisionPointName): SettingFlag[] {
  const d = DECISION_POINTS[which];
  return [
    {
      flag: 'data-plane-service',
      key: KEYS.address,
      default: d.address,
      help: `${d.title}'s Service as the gateways' wasm-shim calls it, HOST:PORT (the wiring-controller's address); Enforced needs a ready endpoint behind it`,
    },
    {
      flag: 'data-plane-failure-mode',
      key: KEYS.mode,
      default: d.failureMode,
      help: `what the wasm-shim does when ${d.title} cannot answer, allow or deny (the wiring-controller's failure mode; said in status)`,
    },
  ];
}

/** `name.namespace.svc[.domain]` or `name.namespace` as a Service, else undefined (an external host). */
export function serviceOf(address: string): { namespace: string; name: string } | undefined {
  const host = address.replace(/:[0-9]{1,5}$/, '');
  const label = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
  const parts = host.split('.');
  const [name, namespace, svc] = parts;
  if (!name || !namespace || !label.test(name) || !label.test(namespace)) return undefined;
  if (parts.length === 2 || svc === 'svc') return { namespace, name };
  return undefined;
}

/** What a gateway kind's controller reads to know its decision point is up (its ClusterRole). */
export const ENDPOINT_SLICES = { group: 'discovery.k8s.io', plural: 'endpointslices' } as const;

type Slice = { endpoints?: { conditions?: { ready?: boolean | null } }[] };

/** A Service's EndpointSlices, in its namespace, by the kubernetes.io/service-name label. */
export const endpointSlicesPath = (s: { namespace: string; name: string }): string =>
  `/apis/discovery.k8s.io/v1/namespaces/${s.namespace}/endpointslices?labelSelector=${encodeURIComponent(`kubernetes.io/service-name=${s.name}`)}`;

/** The ready endpoints of a Service's EndpointSlices (an endpoint without the condition counts as ready). */
export const readyEndpoints = (slices: readonly unknown[]): number =>
  (slices as Slice[]).flatMap((sl) => sl.endpoints ?? []).filter((e) => e.conditions?.ready !== false).length;

/** One decision point's Service, read from its EndpointSlices. */
export class DecisionPoint {
  readonly informers: Informer[];
  private readonly title: string;
  private readonly mode: 'allow' | 'deny';
  private readonly service: { namespace: string; name: string } | undefined;
  private readonly slices: Informer | undefined;

  constructor(
    client: KubeClient,
    onChange: () => void,
    which: DecisionPointName,
    settings: Readonly<Record<string, string>> = {},
  ) {
    const d = DECISION_POINTS[which];
    this.title = d.title;
    this.mode =
      settings[KEYS.mode] === 'deny' ? 'deny' : settings[KEYS.mode] === 'allow' ? 'allow' : d.failureMode;
    this.service = serviceOf(settings[KEYS.address] || d.address);
    this.slices = this.service && new Informer(client, endpointSlicesPath(this.service), () => onChange());
    this.informers = this.slices ? [this.slices] : [];
  }

  /** Why the Service cannot answer (undefined: a ready endpoint, or not a Service of this cluster). */
  gap(): string | undefined {
    const s = this.service;
    if (!s || !this.slices) return undefined;
    const slices = [...this.slices.cache.values()];
    if (readyEndpoints(slices)) return undefined;
    const what = `${this.title} is not answering: its Service ${s.namespace}/${s.name} has ${slices.length ? 'no ready endpoint' : 'no endpoints (is it installed, in that namespace, and does its Service select its pods?)'}`;
    return `${what}; ${this.failureMode()}`;
  }

  /** What requests get when the service cannot answer. */
  failureMode(): string {
    return this.mode === 'allow'
      ? `when ${this.title} cannot answer, requests are allowed unchecked (failure mode allow)`
      : `when ${this.title} cannot answer, requests are denied (failure mode deny)`;
  }
}
