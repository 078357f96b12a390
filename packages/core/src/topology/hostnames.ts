// Hostname intersection as Gateway API defines it for listeners and routes.
// A wildcard `*.example.com` matches one or more leading labels, never `example.com` itself.

function wildcardCovers(wildcard: string, host: string): boolean {
  const suffix = wildcard.slice(1); // ".example.com"
  return host.length > suffix.length && host.endsWith(suffix);
}

/** Whether two hostnames (either may be a wildcard) can both match some request host. */
export function hostnamesIntersect(a: string, b: string): boolean {
  const la = a.toLowerCase();
  const lb = b.toLowerCase();
  if (la === lb) return true;
  const wa = la.startsWith('*.');
  const wb = lb.startsWith('*.');
  // Two wildcards share hosts when one suffix ends with the other (`*.a.io` and `*.b.a.io`).
  if (wa && wb) return la.slice(1).endsWith(lb.slice(1)) || lb.slice(1).endsWith(la.slice(1));
  if (wa) return wildcardCovers(la, lb);
  if (wb) return wildcardCovers(lb, la);
  return false;
}

/**
 * Whether hostname pattern `p` covers `h` (a request host or a more specific pattern): `*` covers
 * everything, `*.example.com` every name with one or more labels before `.example.com` (and
 * narrower wildcards under it), any other name only itself. Case-sensitive: callers fold case.
 */
export function hostnameCovers(p: string, h: string): boolean {
  if (p === h || p === '*') return true;
  return p.startsWith('*.') && wildcardCovers(p, h);
}

/**
 * How specific a hostname is, higher first, as a proxy picks a virtual host: an exact name before any
 * wildcard, a longer wildcard before a shorter one, `*` last.
 */
export function hostnameSpecificity(h: string): number {
  return h === '*' ? 0 : h.startsWith('*.') ? h.length : 100_000 + h.length;
}

/** A listener without hostname accepts every route; a route without hostnames matches every listener. */
export function listenerAcceptsRouteHostnames(
  listenerHostname: string | undefined,
  routeHostnames: string[] | undefined,
): boolean {
  if (!listenerHostname || !routeHostnames || routeHostnames.length === 0) return true;
  return routeHostnames.some((h) => hostnamesIntersect(listenerHostname, h));
}
