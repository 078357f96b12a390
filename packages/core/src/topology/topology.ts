// The Gateway API graph, kept incrementally. Each upsert/remove recomputes only the paths of the
// objects it touches and returns which path keys appeared, disappeared or changed their parents.
import { listenerAcceptsRouteHostnames } from './hostnames.ts';
import { matchesSelector } from './selectors.ts';
import {
  classKey,
  GATEWAY_API_GROUP,
  type GatewayClassObject,
  type GatewayObject,
  gatewayKey,
  type ListenerSpec,
  type NamespaceObject,
  type PathRef,
  type RouteObject,
  routeKey,
  ruleName,
  sectionKey,
} from './types.ts';

export interface TopologyDelta {
  added: string[];
  removed: string[];
  /** Object keys (see types.ts) whose existence changed: policies targeting them change state. */
  objects: string[];
}

const EMPTY: ReadonlySet<string> = new Set();

const emptyDelta = (): TopologyDelta => ({ added: [], removed: [], objects: [] });

function addTo<K, V>(m: Map<K, Set<V>>, k: K, v: V): void {
  let s = m.get(k);
  if (!s) {
    s = new Set();
    m.set(k, s);
  }
  s.add(v);
}

function deleteFrom<K, V>(m: Map<K, Set<V>>, k: K, v: V): void {
  const s = m.get(k);
  if (s) {
    s.delete(v);
    if (s.size === 0) m.delete(k);
  }
}

function routeKindAllowed(listener: ListenerSpec, kind: string): boolean {
  const kinds = listener.allowedRoutes?.kinds;
  if (kinds && kinds.length > 0) {
    return kinds.some((k) => k.kind === kind && (k.group ?? GATEWAY_API_GROUP) === GATEWAY_API_GROUP);
  }
  // Defaults by protocol: HTTP(S) listeners take HTTP and gRPC routes; TLS/TCP/UDP take neither.
  const p = (listener.protocol ?? 'HTTP').toUpperCase();
  return p === 'HTTP' || p === 'HTTPS';
}

export class Topology {
  readonly classes = new Map<string, GatewayClassObject>();
  readonly gateways = new Map<string, GatewayObject>();
  readonly routes = new Map<string, RouteObject>();
  readonly namespaces = new Map<string, NamespaceObject>();
  readonly paths = new Map<string, PathRef>();
  /** Object key (class, gateway, gateway#listener) -> path keys through it. Routes use routePaths. */
  private readonly pathsByObject = new Map<string, Set<string>>();
  /** Gateway key -> keys of routes whose parentRefs name it (whether or not it exists yet). */
  private readonly routesByParent = new Map<string, Set<string>>();
  private readonly routePaths = new Map<string, Set<string>>();

  /** Path keys through an object key; empty if none. */
  pathsThrough(objectKey: string): ReadonlySet<string> {
    if (objectKey.startsWith('Gateway')) return this.pathsByObject.get(objectKey) ?? EMPTY;
    // Routes and route rules are read from the per-route set (a rule has as many paths as listeners).
    const hash = objectKey.indexOf('#');
    if (hash < 0) return this.routePaths.get(objectKey) ?? EMPTY;
    const all = this.routePaths.get(objectKey.slice(0, hash));
    if (!all) return EMPTY;
    const suffix = `|${objectKey}`;
    const out = new Set<string>();
    for (const pk of all) if (pk.endsWith(suffix)) out.add(pk);
    return out;
  }

  /** Whether a target (object key with optional #section) exists. */
  exists(key: string): boolean {
    const [obj, section] = key.split('#') as [string, string | undefined];
    if (obj.startsWith('GatewayClass:'))
      return !section && this.classes.has(obj.slice('GatewayClass:'.length));
    if (obj.startsWith('Gateway:')) {
      const gw = this.gateways.get(obj);
      if (!gw) return false;
      return section === undefined || gw.listeners.some((l) => l.name === section);
    }
    const route = this.routes.get(obj);
    if (!route) return false;
    return section === undefined || route.rules.some((r, i) => ruleName(r, i) === section);
  }

  upsertClass(c: GatewayClassObject): TopologyDelta {
    const existed = this.classes.has(c.name);
    this.classes.set(c.name, c);
    return { ...emptyDelta(), objects: existed ? [] : [classKey(c.name)] };
  }

  removeClass(name: string): TopologyDelta {
    const existed = this.classes.delete(name);
    return { ...emptyDelta(), objects: existed ? [classKey(name)] : [] };
  }

  upsertGateway(gw: GatewayObject): TopologyDelta {
    const key = gatewayKey(gw.namespace, gw.name);
    const old = this.gateways.get(key);
    this.gateways.set(key, gw);
    const delta = this.recomputeRoutes(this.routesByParent.get(key) ?? new Set());
    delta.objects.push(...this.objectKeysChanged(old, gw));
    return delta;
  }

  removeGateway(namespace: string, name: string): TopologyDelta {
    const key = gatewayKey(namespace, name);
    const old = this.gateways.get(key);
    if (!old) return emptyDelta();
    this.gateways.delete(key);
    const delta = this.recomputeRoutes(this.routesByParent.get(key) ?? new Set());
    delta.objects.push(...this.objectKeysChanged(old, undefined));
    return delta;
  }

  upsertRoute(route: RouteObject): TopologyDelta {
    const key = routeKey(route.kind, route.namespace, route.name);
    const old = this.routes.get(key);
    if (old) for (const ref of this.parentGatewayKeys(old)) deleteFrom(this.routesByParent, ref, key);
    this.routes.set(key, route);
    for (const ref of this.parentGatewayKeys(route)) addTo(this.routesByParent, ref, key);
    const delta = this.recomputeRoutes([key]);
    delta.objects.push(...this.routeObjectKeysChanged(old, route));
    return delta;
  }

  removeRoute(kind: string, namespace: string, name: string): TopologyDelta {
    const key = routeKey(kind, namespace, name);
    const old = this.routes.get(key);
    if (!old) return emptyDelta();
    for (const ref of this.parentGatewayKeys(old)) deleteFrom(this.routesByParent, ref, key);
    this.routes.delete(key);
    const delta = this.recomputeRoutes([key]);
    delta.objects.push(...this.routeObjectKeysChanged(old, undefined));
    return delta;
  }

  /** Namespace labels matter to `allowedRoutes.namespaces.from: Selector`: recheck that namespace's routes. */
  upsertNamespace(ns: NamespaceObject): TopologyDelta {
    this.namespaces.set(ns.name, ns);
    return this.recomputeRoutes(this.routesInNamespace(ns.name));
  }

  removeNamespace(name: string): TopologyDelta {
    this.namespaces.delete(name);
    return this.recomputeRoutes(this.routesInNamespace(name));
  }

  private routesInNamespace(ns: string): string[] {
    const out: string[] = [];
    for (const [k, r] of this.routes) if (r.namespace === ns) out.push(k);
    return out;
  }

  private parentGatewayKeys(route: RouteObject): string[] {
    return route.parentRefs
      .filter(
        (p) => (p.kind ?? 'Gateway') === 'Gateway' && (p.group ?? GATEWAY_API_GROUP) === GATEWAY_API_GROUP,
      )
      .map((p) => gatewayKey(p.namespace ?? route.namespace, p.name));
  }

  private objectKeysChanged(old: GatewayObject | undefined, now: GatewayObject | undefined): string[] {
    const names = (g: GatewayObject | undefined) => new Set(g ? g.listeners.map((l) => l.name) : []);
    const key = gatewayKey((old ?? now)!.namespace, (old ?? now)!.name);
    const out = Boolean(old) !== Boolean(now) ? [key] : [];
    const a = names(old);
    const b = names(now);
    for (const n of a) if (!b.has(n)) out.push(sectionKey(key, n));
    for (const n of b) if (!a.has(n)) out.push(sectionKey(key, n));
    return out;
  }

  private routeObjectKeysChanged(old: RouteObject | undefined, now: RouteObject | undefined): string[] {
    const names = (r: RouteObject | undefined) => new Set(r ? r.rules.map(ruleName) : []);
    const r = (old ?? now)!;
    const key = routeKey(r.kind, r.namespace, r.name);
    const out = Boolean(old) !== Boolean(now) ? [key] : [];
    const a = names(old);
    const b = names(now);
    for (const n of a) if (!b.has(n)) out.push(sectionKey(key, n));
    for (const n of b) if (!a.has(n)) out.push(sectionKey(key, n));
    return out;
  }

  private recomputeRoutes(keys: Iterable<string>): TopologyDelta {
    const delta = emptyDelta();
    for (const key of keys) {
      const route = this.routes.get(key);
      const next = new Map<string, PathRef>();
      if (route) {
        for (const p of this.computeRoutePaths(route)) {
          const k = pathObjectKeys.get(p)!;
          next.set(`${k[2]}|${k[4]}`, p);
        }
      }
      const prev = this.routePaths.get(key) ?? new Set<string>();
      for (const pk of prev) {
        if (!next.has(pk)) {
          this.unindexPath(pk);
          delta.removed.push(pk);
        }
      }
      for (const [pk, p] of next) {
        if (!prev.has(pk)) {
          this.indexPath(pk, p);
          delta.added.push(pk);
        } else if (this.paths.get(pk)!.gatewayClass !== p.gatewayClass) {
          // The gateway moved to another class: same key, other parents.
          this.unindexPath(pk);
          this.indexPath(pk, p);
          delta.removed.push(pk);
          delta.added.push(pk);
        }
      }
      if (next.size > 0) this.routePaths.set(key, new Set(next.keys()));
      else this.routePaths.delete(key);
    }
    return delta;
  }

  private indexPath(pk: string, p: PathRef): void {
    this.paths.set(pk, p);
    const k = objectKeysOfPath(p);
    addTo(this.pathsByObject, k[0], pk);
    addTo(this.pathsByObject, k[1], pk);
    addTo(this.pathsByObject, k[2], pk);
  }

  private unindexPath(pk: string): void {
    const p = this.paths.get(pk);
    if (!p) return;
    this.paths.delete(pk);
    const k = objectKeysOfPath(p);
    deleteFrom(this.pathsByObject, k[0], pk);
    deleteFrom(this.pathsByObject, k[1], pk);
    deleteFrom(this.pathsByObject, k[2], pk);
  }

  private namespaceAllowed(gw: GatewayObject, l: ListenerSpec, routeNs: string): boolean {
    const from = l.allowedRoutes?.namespaces?.from ?? 'Same';
    if (from === 'All') return true;
    if (from === 'Same') return routeNs === gw.namespace;
    const sel = l.allowedRoutes?.namespaces?.selector;
    const ns = this.namespaces.get(routeNs);
    return Boolean(sel && ns && matchesSelector(sel, ns.labels));
  }

  private computeRoutePaths(route: RouteObject): PathRef[] {
    const out: PathRef[] = [];
    const rKey = routeKey(route.kind, route.namespace, route.name);
    const rules = route.rules.map((r, i) => {
      const name = ruleName(r, i);
      return { name, key: sectionKey(rKey, name) };
    });
    const routeRef = { kind: route.kind, namespace: route.namespace, name: route.name };
    for (const ref of route.parentRefs) {
      if ((ref.kind ?? 'Gateway') !== 'Gateway' || (ref.group ?? GATEWAY_API_GROUP) !== GATEWAY_API_GROUP)
        continue;
      const gKey = gatewayKey(ref.namespace ?? route.namespace, ref.name);
      const gw = this.gateways.get(gKey);
      if (!gw) continue;
      const cKey = classKey(gw.gatewayClassName);
      const gwRef = { namespace: gw.namespace, name: gw.name };
      for (const l of gw.listeners) {
        if (ref.sectionName !== undefined && ref.sectionName !== l.name) continue;
        if (ref.port !== undefined && ref.port !== l.port) continue;
        if (!routeKindAllowed(l, route.kind)) continue;
        if (!this.namespaceAllowed(gw, l, route.namespace)) continue;
        if (!listenerAcceptsRouteHostnames(l.hostname, route.hostnames)) continue;
        const lKey = sectionKey(gKey, l.name);
        for (const rule of rules) {
          const p: PathRef = {
            gatewayClass: gw.gatewayClassName,
            gateway: gwRef,
            listener: l.name,
            route: routeRef,
            rule: rule.name,
          };
          pathObjectKeys.set(p, [cKey, gKey, lKey, rKey, rule.key]);
          out.push(p);
        }
      }
    }
    return out;
  }
}

type ObjectKeys = [string, string, string, string, string];
/** Object keys of the paths this module built, computed once from shared strings. */
const pathObjectKeys = new WeakMap<PathRef, ObjectKeys>();

/** The object keys a path runs through, least specific first (GatewayClass .. route rule). */
export function objectKeysOfPath(p: PathRef): ObjectKeys {
  const cached = pathObjectKeys.get(p);
  if (cached) return cached;
  const gw = gatewayKey(p.gateway.namespace, p.gateway.name);
  const rt = routeKey(p.route.kind, p.route.namespace, p.route.name);
  return [classKey(p.gatewayClass), gw, sectionKey(gw, p.listener), rt, sectionKey(rt, p.rule)];
}
