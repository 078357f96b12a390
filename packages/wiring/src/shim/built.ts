// A set while the configuration is built (wasm.ts): the set, where it comes from and how it is
// placed; and the small pieces every stage of the build shares.
import { createHash } from 'node:crypto';
import type { MatchCandidate } from '../routes/matches.ts';
import {
  type ActionSet,
  AUTH_CLUSTER,
  AUTH_SERVICE,
  DENY_SCOPE,
  RATELIMIT_CLUSTER,
  RATELIMIT_SERVICE,
  type WasmAction,
  type WasmService,
  type WiringSettings,
} from './config.ts';

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

export function services(s: WiringSettings): Record<string, WasmService> {
  return {
    [AUTH_SERVICE]: {
      type: 'auth',
      endpoint: AUTH_CLUSTER,
      failureMode: s.authFailureMode,
      timeout: s.authTimeout,
    },
    [RATELIMIT_SERVICE]: {
      type: 'ratelimit',
      endpoint: RATELIMIT_CLUSTER,
      failureMode: s.rateLimitFailureMode,
      timeout: s.rateLimitTimeout,
    },
  };
}

export const denyAction = (reason: string): WasmAction => ({
  service: AUTH_SERVICE,
  scope: DENY_SCOPE,
  sources: [`refused: ${reason}`.slice(0, 300)],
});

const sizes = new WeakMap<ActionSet, number>();
/**
 * Bytes one set adds to the configuration (its JSON and the comma before it), measured once per set
 * object: a build that refuses routes measures the same sets again in every round.
 */
export function setBytes(s: ActionSet): number {
  let n = sizes.get(s);
  if (n === undefined) {
    n = Buffer.byteLength(JSON.stringify(s)) + 1;
    sizes.set(s, n);
  }
  return n;
}
