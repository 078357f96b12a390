// A gateway's provider objects from its wiring, as the wiring-controller publishes them and
// `cascadectl render` prints them: the configuration in the form published, split over WasmPlugins
// when it is large (Istio: shards.ts), with the annotations the kind controllers read (wiring-state.ts).
// Pure.
import type { RenderedObject } from '@cascade/core';
import {
  type Provider,
  type ProviderSettings,
  type ProviderTarget,
  providerObjects,
} from '../providers/providers.ts';
import type { WiringResult, WiringSettings } from '../shim/config.ts';
import { shardConfig } from '../shim/shards.ts';
import { publishedConfig } from '../shim/typed.ts';
import {
  FAILED_CLOSED_ANNOTATION,
  REFUSED_ROUTES_ANNOTATION,
  refusedRoutesAnnotation,
} from './wiring-state.ts';

/** The configuration's shards in the form published: several only for Istio (see providerObjects). */
function publishedShards(provider: Provider, w: WiringResult, wiring: WiringSettings) {
  const shards =
    provider === 'istio'
      ? shardConfig(w.config, wiring, w.bytes)
      : [{ index: 0, count: 1, config: w.config }];
  return shards.map((s) => ({ ...s, config: publishedConfig(s.config, wiring) }));
}

/** The provider objects of a gateway whose configuration has actions. */
export function wiringObjects(
  provider: Provider,
  target: ProviderTarget,
  w: WiringResult,
  wiring: WiringSettings,
  providers: ProviderSettings,
): RenderedObject[] {
  const refused = refusedRoutesAnnotation(w.problems.filter((p) => p.size).map((p) => p.route));
  const out = providerObjects(provider, target, publishedShards(provider, w, wiring), providers);
  for (const o of out) {
    // nothing fitted: the configuration denies everything, and the kinds' controllers read this
    // annotation to say Enforced=False on every policy of the gateway
    if (w.failedClosed)
      o.metadata.annotations = {
        ...o.metadata.annotations,
        [FAILED_CLOSED_ANNOTATION]: w.failedClosed.slice(0, 1000),
      };
    // the routes refused for size, on each object that carries configuration: their policies say
    // they are not enforced
    if (refused && (o.kind === 'WasmPlugin' || o.kind === 'EnvoyExtensionPolicy'))
      o.metadata.annotations = { ...o.metadata.annotations, [REFUSED_ROUTES_ANNOTATION]: refused };
  }
  return out;
}
