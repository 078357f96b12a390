// A large gateway configuration split over several WasmPlugins (shards), so that a route's change
// rewrites one object of tens of kilobytes instead of one of 500 KB: the API server's own patch of a
// 560 KB object took 165-270 ms, most of a route change's latency (wiring README, "Large gateways").
//
// Why it is the same configuration. wasm-shim looks a request's host up among the hostnames of its
// own configuration, takes the longest one matching, and runs the first of that hostname's sets whose
// predicates hold (wasm.ts header). Two hostnames that can match one host are in a covering relation
// (equal, or one a wildcard suffix of the other), so the hostnames are grouped by that relation
// (every hostname joined to each wildcard above it that the configuration has) and a group is never
// split: whichever shard holds a request's hostnames holds all of them, in the original order, and
// picks the same set the whole configuration would; every other shard holds no hostname matching the
// host and does nothing. The one exception is the host-case guard under `*` (layout.ts), which only
// denies a host not in lower case: it is repeated in every shard, and any shard's denial is the
// whole configuration's. A route hostname `*` joins every group: such a configuration stays whole.
// Each chain of WasmPlugins on a gateway then runs at most one shard's actions per request
// (property test: shards.test.ts, against request.ts's evaluation of the whole configuration).
//
// Which shard: a group goes to shard hash(its least specific hostname) mod N, N a power of two from
// the configuration's size (N = 1, the configuration unsplit, up to `shardBytes`), so a route's
// change moves no other group and N changes only when the size crosses a power of two. A shard
// whose sets carry no action (routes without policy, guards) is not published: it would change no
// request's outcome.

import { hostnameSpecificity } from '@cascade/core';
import { hash, services } from './built.ts';
import type { ActionSet, WasmConfig, WiringSettings } from './config.ts';
import { isHostCaseGuard } from './layout.ts';

/** Configurations up to this size stay one WasmPlugin (bytes, in the form published). */
export const DEFAULT_SHARD_BYTES = 65_536;
/** At most this many WasmPlugins per gateway (each is a wasm filter every request passes). */
export const MAX_SHARDS = 32;

export interface Shard {
  /** Which shard (0 to count - 1): names the object, stable while the count holds. */
  index: number;
  /** How many shards the configuration is split over (1: not split). */
  count: number;
  config: WasmConfig;
}

/** Each wildcard hostname that covers `h` besides itself, nearest first (`*` last). */
function wildcardsAbove(h: string): string[] {
  const labels = h.split('.');
  const first = labels[0] === '*' ? 2 : 1;
  const out: string[] = [];
  for (let i = first; i < labels.length; i++) out.push(`*.${labels.slice(i).join('.')}`);
  if (h !== '*') out.push('*');
  return out;
}

const hostnameOf = (s: ActionSet) => s.routeRuleConditions.hostnames[0] ?? '*';

/** Each hostname's group key: the group's least specific hostname (then the first by name). */
export function hostnameGroups(hostnames: Iterable<string>): Map<string, string> {
  const parent = new Map<string, string>();
  for (const h of hostnames) parent.set(h, h);
  const find = (h: string): string => {
    let r = h;
    while (parent.get(r) !== r) r = parent.get(r)!;
    // path halving is not needed at these sizes; compress fully instead
    let x = h;
    while (x !== r) {
      const next = parent.get(x)!;
      parent.set(x, r);
      x = next;
    }
    return r;
  };
  const rank = (h: string): [number, string] => [hostnameSpecificity(h), h];
  const before = (a: string, b: string) => {
    const [sa, na] = rank(a);
    const [sb, nb] = rank(b);
    return sa !== sb ? sa < sb : na < nb;
  };
  for (const h of [...parent.keys()])
    for (const w of wildcardsAbove(h)) {
      if (!parent.has(w)) continue;
      const a = find(h);
      const b = find(w);
      if (a === b) continue;
      // the root stays the group's least specific hostname: the key
      if (before(a, b)) parent.set(b, a);
      else parent.set(a, b);
    }
  const out = new Map<string, string>();
  for (const h of parent.keys()) out.set(h, find(h));
  return out;
}

/** How many shards a configuration of `bytes` is split over. */
export function shardCount(bytes: number, shardBytes: number): number {
  if (!(shardBytes > 0) || bytes <= shardBytes) return 1;
  let n = 1;
  while (n < MAX_SHARDS && bytes / n > shardBytes) n *= 2;
  return n;
}

/**
 * The configuration's shards (see the header), those with actions, by index; one shard holding the
 * configuration itself when it is not split.
 */
export function shardConfig(config: WasmConfig, settings: WiringSettings, bytes: number): Shard[] {
  const count = shardCount(bytes, settings.shardBytes ?? DEFAULT_SHARD_BYTES);
  if (count === 1) return [{ index: 0, count, config }];
  // the `*` host-case guard, repeated in every shard (see the header); with a route under `*` it is
  // first of that group, which is every set
  const starRoute = config.actionSets.some((s) => hostnameOf(s) === '*' && !isHostCaseGuard(s));
  const repeated = (s: ActionSet) => !starRoute && isHostCaseGuard(s) && hostnameOf(s) === '*';
  const groups = hostnameGroups(config.actionSets.filter((s) => !repeated(s)).map(hostnameOf));
  const slotOf = new Map<string, number>();
  for (const key of new Set(groups.values()))
    slotOf.set(key, Number.parseInt(hash(`shard:${key}`).slice(0, 8), 16) % count);
  const sets: ActionSet[][] = Array.from({ length: count }, () => []);
  const guards: ActionSet[] = [];
  for (const s of config.actionSets) {
    if (repeated(s)) {
      // in every shard, where it stands in the whole: `*` sorts last (wasm.ts assemble)
      guards.push(s);
      continue;
    }
    sets[slotOf.get(groups.get(hostnameOf(s))!)!]!.push(s);
  }
  const out: Shard[] = [];
  sets.forEach((own, index) => {
    if (!own.some((s) => s.actions.length > 0 && !isHostCaseGuard(s))) return;
    const actionSets = [...own, ...guards];
    out.push({ index, count, config: { services: services(settings, actionSets), actionSets } });
  });
  return out;
}
