// The wiring-controller's own flags: what wasm-shim is told about its services and where the provider
// objects point. Each bad value is one line naming the flag (exit 2 through Binary.fail).
import {
  DEFAULT_PROVIDERS,
  type Endpoint,
  type ProviderSettings,
  WASM_SHIM_IMAGES,
} from '../providers/providers.ts';
import { DEFAULT_SHARD_BYTES } from '../shim/shards.ts';
import { DEFAULT_WIRING, type WiringSettings } from '../shim/wasm.ts';

export const WIRING_FLAGS = {
  'auth-failure-mode': { type: 'string', default: DEFAULT_WIRING.authFailureMode },
  'auth-timeout': { type: 'string', default: DEFAULT_WIRING.authTimeout },
  'ratelimit-failure-mode': { type: 'string', default: DEFAULT_WIRING.rateLimitFailureMode },
  'ratelimit-timeout': { type: 'string', default: DEFAULT_WIRING.rateLimitTimeout },
  'max-config-bytes': { type: 'string', default: String(DEFAULT_WIRING.maxConfigBytes) },
  'max-sets-per-namespace': { type: 'string', default: String(DEFAULT_WIRING.maxSetsPerNamespace) },
  'config-form': { type: 'string', default: 'legacy' },
  'wasm-shard-bytes': { type: 'string', default: String(DEFAULT_SHARD_BYTES) },
  'wasm-shim-image': { type: 'string', default: '' },
  'authorino-address': {
    type: 'string',
    default: `${DEFAULT_PROVIDERS.authorino.host}:${DEFAULT_PROVIDERS.authorino.port}`,
  },
  'limitador-address': {
    type: 'string',
    default: `${DEFAULT_PROVIDERS.limitador.host}:${DEFAULT_PROVIDERS.limitador.port}`,
  },
  'istio-controllers': { type: 'string', default: DEFAULT_PROVIDERS.istioControllers.join(',') },
  'envoy-gateway-controllers': {
    type: 'string',
    default: DEFAULT_PROVIDERS.envoyGatewayControllers.join(','),
  },
} as const;

export const WIRING_USAGE = `  --auth-failure-mode deny|allow     when Authorino cannot answer (default "deny")
  --auth-timeout DURATION            e.g. 200ms (default "200ms")
  --ratelimit-failure-mode allow|deny when Limitador cannot answer (default "allow")
  --ratelimit-timeout DURATION       (default "100ms")
  --max-config-bytes N               largest wasm-shim configuration of one gateway; past it
                                     routes are refused and denied, shared fairly between
                                     namespaces (default 1000000)
  --max-sets-per-namespace N         action sets one namespace may have on one gateway (default 4096)
  --wasm-shard-bytes N               Istio: a configuration larger than this is split over
                                     several WasmPlugins by hostname group, so a route's change
                                     rewrites a small object; 0: never split (default 65536)
  --config-form legacy|typed         the wasm-shim configuration written: legacy (services +
                                     actionSets, wasm-shim v0.12+) or typed (grpc actions with
                                     CEL message builders, wasm-shim v0.14+, as kuadrant-operator
                                     main writes it) (default "legacy")
  --wasm-shim-image REF              the wasm-shim OCI image, without scheme (default: the one
                                     the form needs, ${WASM_SHIM_IMAGES.legacy} or ${WASM_SHIM_IMAGES.typed})
  --authorino-address HOST:PORT      Authorino's authorization Service (gRPC)
  --limitador-address HOST:PORT      Limitador's gRPC (rate-limit) Service
  --istio-controllers LIST           GatewayClass controllerNames run by Istio (comma-separated)
  --envoy-gateway-controllers LIST   GatewayClass controllerNames run by Envoy Gateway
`;

const DURATION = /^[0-9]{1,6}(ms|s)$/;
const HOST = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const CONTROLLER = /^[A-Za-z0-9.-]{1,253}\/[A-Za-z0-9/._~%!$&'()*+,;=:-]{1,253}$/;

/** The flags' values as settings, or the first problem. */
export function wiringFlags(
  v: Record<string, unknown>,
): { wiring: WiringSettings; providers: ProviderSettings } | { error: string } {
  const mode = (flag: string): 'allow' | 'deny' | string => {
    const m = String(v[flag]);
    return m === 'allow' || m === 'deny' ? m : `--${flag}: "${m.slice(0, 40)}" is not allow or deny`;
  };
  const duration = (flag: string) =>
    DURATION.test(String(v[flag]))
      ? String(v[flag])
      : `--${flag}: "${String(v[flag]).slice(0, 40)}" is not a duration like 200ms or 1s`;
  const endpoint = (flag: string): Endpoint | string => {
    const m = /^([^:]+):([0-9]{1,5})$/.exec(String(v[flag]));
    const port = Number(m?.[2]);
    if (!m || !HOST.test(m[1]!) || port < 1 || port > 65535)
      return `--${flag}: "${String(v[flag]).slice(0, 80)}" is not HOST:PORT`;
    return { host: m[1]!, port };
  };
  const list = (flag: string): string[] | string => {
    const items = String(v[flag])
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean);
    const bad = items.find((x) => !CONTROLLER.test(x));
    return bad
      ? `--${flag}: "${bad.slice(0, 80)}" is not a GatewayClass controllerName (domain/path)`
      : items;
  };
  const authMode = mode('auth-failure-mode');
  const rlMode = mode('ratelimit-failure-mode');
  const authTimeout = duration('auth-timeout');
  const rlTimeout = duration('ratelimit-timeout');
  const authorino = endpoint('authorino-address');
  const limitador = endpoint('limitador-address');
  const istio = list('istio-controllers');
  const eg = list('envoy-gateway-controllers');
  const max = Number(v['max-config-bytes']);
  const setCap = Number(v['max-sets-per-namespace']);
  const form = String(v['config-form']);
  const shardBytes = Number(v['wasm-shard-bytes']);
  if (!Number.isInteger(shardBytes) || (shardBytes !== 0 && (shardBytes < 10_000 || shardBytes > 1_400_000)))
    return {
      error: `--wasm-shard-bytes: "${String(v['wasm-shard-bytes']).slice(0, 40)}" is not 0 or a whole number from 10000 to 1400000`,
    };
  if (form !== 'legacy' && form !== 'typed')
    return { error: `--config-form: "${form.slice(0, 40)}" is not legacy or typed` };
  const image = String(v['wasm-shim-image'] || WASM_SHIM_IMAGES[form]);
  for (const x of [authMode, rlMode, authTimeout, rlTimeout, istio, eg])
    if (typeof x === 'string' && x.startsWith('--')) return { error: x };
  for (const x of [authorino, limitador]) if (typeof x === 'string') return { error: x };
  if (!Number.isInteger(max) || max < 10_000 || max > 1_400_000)
    return {
      error: `--max-config-bytes: "${v['max-config-bytes']}" is not a whole number from 10000 to 1400000`,
    };
  if (!Number.isInteger(setCap) || setCap < 1 || setCap > 100_000)
    return {
      error: `--max-sets-per-namespace: "${v['max-sets-per-namespace']}" is not a whole number from 1 to 100000`,
    };
  if (!/^[a-z0-9][a-z0-9._/:@-]{0,300}$/i.test(image) || image.includes('://'))
    return { error: `--wasm-shim-image: "${image.slice(0, 80)}" is not an OCI reference without scheme` };
  return {
    wiring: {
      authFailureMode: authMode as 'allow' | 'deny',
      authTimeout: authTimeout,
      rateLimitFailureMode: rlMode as 'allow' | 'deny',
      rateLimitTimeout: rlTimeout,
      maxConfigBytes: max,
      maxSetsPerNamespace: setCap,
      configForm: form,
      shardBytes,
    },
    providers: {
      istioControllers: istio as string[],
      envoyGatewayControllers: eg as string[],
      wasmShimImage: image,
      authorino: authorino as Endpoint,
      limitador: limitador as Endpoint,
    },
  };
}
