// The provider objects that put a gateway's wasm-shim configuration into its Envoy, chosen by the
// GatewayClass controllerName:
//   - Istio: a WasmPlugin (extensions.istio.io/v1alpha1) targeting the Gateway, phase STATS, with the
//     configuration as pluginConfig; two EnvoyFilters (networking.istio.io/v1alpha3) that ADD the
//     clusters the services call (`kuadrant-auth-service` -> Authorino's authorization Service,
//     `kuadrant-ratelimit-service` -> Limitador's gRPC port; STRICT_DNS, HTTP/2).
//   - Envoy Gateway: an EnvoyExtensionPolicy (gateway.envoyproxy.io/v1alpha1) with the wasm-shim
//     image, root id `kuadrant_wasm_shim` and the configuration, failOpen false; two
//     EnvoyPatchPolicies (JSONPatch) adding the same clusters (Envoy Gateway must run with
//     `extensionApis.enableEnvoyPatchPolicy: true`).
// Pure: the controller publishes them (beside the Gateway, owned by it), the CLI prints them.

import type { RenderedObject } from '@cascade/core';
import { labelValue, objectName } from '@cascade/core';
import type { Precedence } from '../routes/matches.ts';
import type { TypedWasmConfig } from '../shim/typed.ts';
import { AUTH_CLUSTER, RATELIMIT_CLUSTER, type WasmConfig } from '../shim/wasm.ts';

/** The label on every object the wiring writes (its value: the provider); how every reader finds them. */
export const WIRING_LABEL = 'cascade.dev/wiring';

/** A provider resource's objects that carry the wiring label, as a list path. */
export const wiringListPath = (r: { group: string; version: string; plural: string }): string =>
  `/apis/${r.group}/${r.version}/${r.plural}?labelSelector=${encodeURIComponent(WIRING_LABEL)}`;

export type Provider = 'istio' | 'envoy-gateway';

/** Each provider as people name it (messages). */
export const PROVIDER_TITLES: Record<Provider, string> = { istio: 'Istio', 'envoy-gateway': 'Envoy Gateway' };

export interface Endpoint {
  host: string;
  port: number;
}

export interface ProviderSettings {
  /** GatewayClass controllerNames run by Istio. */
  istioControllers: readonly string[];
  /** GatewayClass controllerNames run by Envoy Gateway. */
  envoyGatewayControllers: readonly string[];
  /** The wasm-shim image (an OCI reference without scheme). */
  wasmShimImage: string;
  authorino: Endpoint;
  limitador: Endpoint;
}

/** The wasm-shim image each configuration form needs (the typed form: v0.14 and later). */
export const WASM_SHIM_IMAGES = {
  legacy: 'quay.io/kuadrant/wasm-shim:v0.12.4',
  typed: 'quay.io/kuadrant/wasm-shim:v0.14.1',
} as const;

export const DEFAULT_PROVIDERS: ProviderSettings = {
  istioControllers: ['istio.io/gateway-controller', 'openshift.io/gateway-controller/v1'],
  envoyGatewayControllers: ['gateway.envoyproxy.io/gatewayclass-controller'],
  wasmShimImage: WASM_SHIM_IMAGES.legacy,
  authorino: { host: 'authorino-authorino-authorization.kuadrant-system.svc.cluster.local', port: 50051 },
  limitador: { host: 'limitador-limitador.kuadrant-system.svc.cluster.local', port: 8081 },
};

/** The resources each provider's objects are (for informers, RBAC and the "is it served" check). */
export const PROVIDER_RESOURCES: Record<
  Provider,
  { group: string; version: string; kind: string; plural: string }[]
> = {
  istio: [
    { group: 'extensions.istio.io', version: 'v1alpha1', kind: 'WasmPlugin', plural: 'wasmplugins' },
    { group: 'networking.istio.io', version: 'v1alpha3', kind: 'EnvoyFilter', plural: 'envoyfilters' },
  ],
  'envoy-gateway': [
    {
      group: 'gateway.envoyproxy.io',
      version: 'v1alpha1',
      kind: 'EnvoyExtensionPolicy',
      plural: 'envoyextensionpolicies',
    },
    {
      group: 'gateway.envoyproxy.io',
      version: 'v1alpha1',
      kind: 'EnvoyPatchPolicy',
      plural: 'envoypatchpolicies',
    },
  ],
};

/** Whose route precedence a provider's gateways follow (matches.ts). */
export function precedenceOf(provider: Provider | undefined): Precedence {
  return provider === 'istio' ? 'istio' : 'envoy-gateway';
}

/**
 * The port the provider's Envoy listens on for a listener port (`destination.port` in wasm-shim):
 * Envoy Gateway shifts ports below 1024 by 10000 (its servicePortToContainerPort); Istio's gateway
 * binds the listener's port itself.
 */
export function proxyPort(provider: Provider | undefined, listenerPort: number): number {
  return provider === 'envoy-gateway' && listenerPort < 1024 ? listenerPort + 10000 : listenerPort;
}

export function providerOf(controllerName: string | undefined, s: ProviderSettings): Provider | undefined {
  if (!controllerName) return undefined;
  if (s.istioControllers.includes(controllerName)) return 'istio';
  if (s.envoyGatewayControllers.includes(controllerName)) return 'envoy-gateway';
  return undefined;
}

/** An Envoy cluster for one service (STRICT_DNS, HTTP/2: both services speak gRPC). */
function cluster(name: string, e: Endpoint): Record<string, unknown> {
  return {
    name,
    type: 'STRICT_DNS',
    connect_timeout: '1s',
    lb_policy: 'ROUND_ROBIN',
    http2_protocol_options: {},
    load_assignment: {
      cluster_name: name,
      endpoints: [
        {
          lb_endpoints: [
            { endpoint: { address: { socket_address: { address: e.host, port_value: e.port } } } },
          ],
        },
      ],
    },
  };
}

export interface ProviderTarget {
  gateway: { namespace: string; name: string; uid?: string };
  controller: string;
}

/** One part of a gateway's configuration, in the form published (typed.ts publishedConfig). */
export interface PublishedShard {
  /** 0 to count - 1 (shards.ts); 0 of 1 for a configuration that is not split. */
  index: number;
  count: number;
  config: WasmConfig | TypedWasmConfig;
}

/** The annotation on a shard's WasmPlugin: which part of the gateway's configuration it holds. */
export const SHARD_ANNOTATION = 'cascade.dev/wiring-shard';

/**
 * A WasmPlugin's name: `cascade-<gateway>` for the first shard (the only one of a configuration that
 * is not split), `cascade.shard<i>.<gateway>` for the others. The dot keeps them apart from every
 * gateway's first: those all begin `cascade-`.
 */
export const wasmPluginName = (gateway: string, index: number): string =>
  objectName(index === 0 ? `cascade-${gateway}` : `cascade.shard${index}.${gateway}`);

/**
 * The provider objects of one gateway's configuration: a WasmPlugin per shard for Istio (several
 * WasmPlugins on one gateway each run their filter; shards.ts makes them act as one); one
 * EnvoyExtensionPolicy for Envoy Gateway (a second one on the same gateway would conflict), so its
 * configuration must come as one shard.
 */
export function providerObjects(
  provider: Provider,
  t: ProviderTarget,
  shards: readonly PublishedShard[],
  s: ProviderSettings,
): RenderedObject[] {
  if (provider !== 'istio' && shards.length !== 1)
    throw new Error(`${PROVIDER_TITLES[provider]}: one configuration per gateway, not ${shards.length}`);
  const gw = t.gateway;
  const meta = (suffix: string, name = objectName(`cascade-${gw.name}${suffix}`)) => ({
    name,
    namespace: gw.namespace,
    labels: {
      'cascade.dev/managed-by': t.controller,
      'cascade.dev/gateway': labelValue(gw.name),
      [WIRING_LABEL]: provider,
    },
    annotations: { 'cascade.dev/gateway': `${gw.namespace}/${gw.name}` } as Record<string, string>,
    ...(gw.uid
      ? {
          ownerReferences: [
            { apiVersion: 'gateway.networking.k8s.io/v1', kind: 'Gateway', name: gw.name, uid: gw.uid },
          ],
        }
      : {}),
  });
  const targetRef = { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: gw.name };
  const clusters: [string, string, Endpoint][] = [
    ['-auth', AUTH_CLUSTER, s.authorino],
    ['-ratelimit', RATELIMIT_CLUSTER, s.limitador],
  ];
  if (provider === 'istio')
    return [
      ...shards.map((shard) => {
        const m = meta('', wasmPluginName(gw.name, shard.index));
        if (shard.count > 1) m.annotations[SHARD_ANNOTATION] = `${shard.index}/${shard.count}`;
        return {
          apiVersion: 'extensions.istio.io/v1alpha1',
          kind: 'WasmPlugin',
          metadata: m,
          spec: {
            targetRefs: [targetRef],
            url: `oci://${s.wasmShimImage}`,
            phase: 'STATS',
            pluginConfig: shard.config,
          },
        };
      }),
      ...clusters.map(([suffix, name, e]) => ({
        apiVersion: 'networking.istio.io/v1alpha3',
        kind: 'EnvoyFilter',
        metadata: meta(suffix),
        spec: {
          targetRefs: [targetRef],
          configPatches: [
            {
              applyTo: 'CLUSTER',
              match: { context: 'GATEWAY' },
              patch: { operation: 'ADD', value: cluster(name, e) },
            },
          ],
        },
      })),
    ];
  return [
    {
      apiVersion: 'gateway.envoyproxy.io/v1alpha1',
      kind: 'EnvoyExtensionPolicy',
      metadata: meta(''),
      spec: {
        targetRefs: [targetRef],
        wasm: [
          {
            name: 'kuadrant-wasm-shim',
            rootID: 'kuadrant_wasm_shim',
            failOpen: false,
            code: { type: 'Image', image: { url: s.wasmShimImage } },
            config: shards[0]!.config,
          },
        ],
      },
    },
    ...clusters.map(([suffix, name, e]) => ({
      apiVersion: 'gateway.envoyproxy.io/v1alpha1',
      kind: 'EnvoyPatchPolicy',
      metadata: meta(suffix),
      spec: {
        targetRef,
        type: 'JSONPatch',
        jsonPatches: [
          {
            type: 'type.googleapis.com/envoy.config.cluster.v3.Cluster',
            name,
            operation: { op: 'add', path: '', value: cluster(name, e) },
          },
        ],
      },
    })),
  ];
}
