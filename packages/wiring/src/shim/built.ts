// A set while the configuration is built (wasm.ts): the set, where it comes from and how it is
// placed; and the small pieces every stage of the build shares.
import { createHash } from 'node:crypto';
import type { MatchCandidate } from '../routes/matches.ts';
import {
  type ActionSet,
  AUTH_CLUSTER,
  AUTH_SERVICE,
  DENY_SCOPE,
  RATELIMIT_CHECK_SERVICE,
  RATELIMIT_CLUSTER,
  RATELIMIT_REPORT_SERVICE,
  RATELIMIT_SERVICE,
  type WasmAction,
  type WasmService,
  type WiringSettings,
} from './config.ts';
import { typedSet } from './typed.ts';

export interface Built {
  origin: { route: string; rule: string; listener: string };
  candidate: MatchCandidate;
  set: ActionSet;
  route: string;
  refused: boolean;
  /** The ports of the listeners the set's path is reached through (empty: unknown). */
  ports: Set<number>;
  /** A guard placed first under its hostname. */
  guard?: boolean;
  /** A deny set standing for a route refused for size. */
  sizeRefused?: boolean;
}

export const hash = (s: string) => createHash('sha256').update(s).digest('hex').slice(0, 16);

/**
 * The legacy form's services; the token-limit ones (Limitador's CheckRateLimit and Report, which
 * wasm-shim knows since v0.12) only when some action calls them, so a configuration without token
 * limits stays what older wasm-shim reads.
 */
export function services(s: WiringSettings, sets: readonly ActionSet[] = []): Record<string, WasmService> {
  const rl = (type: WasmService['type']): WasmService => ({
    type,
    endpoint: RATELIMIT_CLUSTER,
    failureMode: s.rateLimitFailureMode,
    timeout: s.rateLimitTimeout,
  });
  const used = new Set(sets.flatMap((x) => x.actions.map((a) => a.service)));
  return {
    ...(used.has(RATELIMIT_CHECK_SERVICE) ? { [RATELIMIT_CHECK_SERVICE]: rl('ratelimit-check') } : {}),
    ...(used.has(RATELIMIT_REPORT_SERVICE) ? { [RATELIMIT_REPORT_SERVICE]: rl('ratelimit-report') } : {}),
    [AUTH_SERVICE]: {
      type: 'auth',
      endpoint: AUTH_CLUSTER,
      failureMode: s.authFailureMode,
      timeout: s.authTimeout,
    },
    [RATELIMIT_SERVICE]: rl('ratelimit'),
  };
}

export const denyAction = (reason: string): WasmAction => ({
  service: AUTH_SERVICE,
  scope: DENY_SCOPE,
  sources: [`refused: ${reason}`.slice(0, 300)],
});

const sizes = { legacy: new WeakMap<ActionSet, number>(), typed: new WeakMap<ActionSet, number>() };
/**
 * Bytes one set adds to the configuration in the form published (its JSON and the comma before
 * it), measured once per set object: a build that refuses routes measures the same sets again in
 * every round.
 */
export function setBytes(s: ActionSet, form: 'legacy' | 'typed' = 'legacy'): number {
  let n = sizes[form].get(s);
  if (n === undefined) {
    n = Buffer.byteLength(JSON.stringify(form === 'typed' ? typedSet(s) : s)) + 1;
    sizes[form].set(s, n);
  }
  return n;
}
