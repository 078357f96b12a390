// How the sets are laid out for what wasm-shim cannot see (wasm.ts header): listeners on several
// ports (a `destination.port` predicate, less specific sets repeated under the hostnames another port
// has) and the host-case guards.
import { hostnameCovers, hostnameSpecificity } from '@cascade/core';
import type { Built } from './built.ts';
import { type ActionSet, AUTH_SERVICE, DENY_SCOPE, HOST_NOT_LOWER, type WiringSettings } from './config.ts';

/**
 * Listeners on several ports (see the header): each set holds its ports, and where a hostname of
 * the configuration has, on some port, no set of its own but a less specific one, that one is
 * repeated under the hostname for that port.
 */
export function perPort(built: Built[], listening: readonly number[]): Built[] {
  const ports = new Set<number>(listening);
  for (const b of built) for (const p of b.ports) ports.add(p);
  if (ports.size < 2) return built;
  const portPredicate = (ps: Iterable<number>) => {
    const list = [...ps].sort((a, b) => a - b);
    return list.length === 1 ? `destination.port == ${list[0]}` : `destination.port in [${list.join(', ')}]`;
  };
  const out: Built[] = built.map((b) =>
    b.ports.size === 0 ? b : { ...b, set: withPredicate(b.set, portPredicate(b.ports)) },
  );
  // the hostnames each port has virtual hosts for
  const hostsOf = new Map<number, Set<string>>();
  for (const b of built)
    for (const p of b.ports) {
      const hs = hostsOf.get(p) ?? new Set<string>();
      hs.add(b.candidate.hostname);
      hostsOf.set(p, hs);
    }
  const keys = [...new Set(built.map((b) => b.candidate.hostname))];
  // per (port, key): the virtual host the proxy picks for requests wasm-shim files under key
  const memo = new Map<string, string | undefined>();
  const vhost = (port: number, key: string): string | undefined => {
    const m = `${port}|${key}`;
    if (memo.has(m)) return memo.get(m);
    let best: string | undefined;
    for (const h of hostsOf.get(port) ?? [])
      if (
        hostnameCovers(h, key) &&
        (best === undefined || hostnameSpecificity(h) > hostnameSpecificity(best))
      )
        best = h;
    memo.set(m, best);
    return best;
  };
  for (const b of built) {
    const from = b.candidate.hostname;
    if (!from.startsWith('*')) continue;
    for (const key of keys) {
      if (key === from || !hostnameCovers(from, key)) continue;
      const viaPorts = [...b.ports].filter((p) => vhost(p, key) === from);
      if (viaPorts.length === 0) continue;
      const set = withPredicate(b.set, portPredicate(viaPorts));
      out.push({
        ...b,
        ports: new Set(viaPorts),
        set: {
          ...set,
          name: `${b.set.name}~${key}`,
          routeRuleConditions: { ...set.routeRuleConditions, hostnames: [key] },
        },
      });
    }
  }
  return out;
}

function withPredicate(set: ActionSet, predicate: string): ActionSet {
  return {
    ...set,
    routeRuleConditions: {
      ...set.routeRuleConditions,
      predicates: [predicate, ...(set.routeRuleConditions.predicates ?? [])],
    },
  };
}

export const GUARD_PREFIX = 'cascade:host-case@';
/** Whether a set is a host-case guard (see the header). */
export const isHostCaseGuard = (s: ActionSet): boolean => s.name.startsWith(GUARD_PREFIX);

/** The host-case guards (see the header), one under `*` and one under each wildcard hostname. */
export function withGuards(built: Built[], settings: WiringSettings): Built[] {
  if (settings.hostLookupFoldsCase || built.length === 0) return built;
  const keys = new Set(built.flatMap((b) => b.set.routeRuleConditions.hostnames));
  keys.add('*');
  const guards: Built[] = [...keys]
    .filter((k) => k.startsWith('*'))
    .map((k) => ({
      origin: { route: '*', rule: '*', listener: '*' },
      route: '*',
      refused: true,
      guard: true,
      ports: new Set<number>(),
      candidate: {
        hostname: k,
        routeKind: 'HTTPRoute',
        routeNamespace: '',
        routeName: '',
        ruleIndex: 0,
        matchIndex: 0,
        match: undefined,
      },
      set: {
        name: `${GUARD_PREFIX}${k}`,
        routeRuleConditions: { hostnames: [k], predicates: [HOST_NOT_LOWER] },
        actions: [
          {
            service: AUTH_SERVICE,
            scope: DENY_SCOPE,
            sources: [
              'host not in lower case: wasm-shim looks hostnames up as written and the proxy does not, so it is denied rather than let past its policies',
            ],
          },
        ],
      },
    }));
  return [...built, ...guards];
}
