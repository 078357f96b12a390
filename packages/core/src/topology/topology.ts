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
  /** Routes whose set of paths changed. */
  routes: string[];
}

const EMPTY: ReadonlySet<string> = new Set();

const emptyDelta = (): TopologyDelta => ({ added: [], removed: [], objects: [], routes: [] });

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
  /** Path key -> the object keys it runs through (see objectKeysOfPath). */
  private readonly pathKeys = new Map<string, ObjectKeys>();
  /**
   * Object key (class, gateway, gateway#listener) -> keys of the routes with a path through it. Indexing
   * routes rather than paths keeps these sets a third of the size (a route has one path per rule).
   */
  private readonly routesByObject = new Map<string, Set<string>>();
  /** Route key -> the class/gateway/listener keys its paths run through. */
  private readonly routeUpperKeys = new Map<string, Set<string>>();
  /** Gateway key -> keys of routes whose parentRefs name it (whether or not it exists yet). */
  private readonly routesByParent = new Map<string, Set<string>>();
  private readonly routePaths = new Map<string, Set<string>>();

  /** The object keys (class, gateway, listener, route, rule) of a known path. */
  objectKeys(pk: string): ObjectKeys | undefined {
    return this.pathKeys.get(pk);
  }

  /** Path keys of one route; empty if none. */
  routePathKeys(route: string): ReadonlySet<string> {
    return this.routePaths.get(route) ?? EMPTY;
  }

  /** Keys of the routes with a path through an object key (class, gateway, listener, route, rule). */
  routesThrough(objectKey: string): Iterable<string> {
    if (objectKey.startsWith('Gateway')) return this.routesByObject.get(objectKey) ?? EMPTY;
    const hash = objectKey.indexOf('#');
    const route = hash < 0 ? objectKey : objectKey.slice(0, hash);
    return this.routePaths.has(route) ? [route] : [];
  }

  /** Path keys through an object key; empty if none. */
  pathsThrough(objectKey: string): ReadonlySet<string> {
    const out = new Set<string>();
    const level = objectKeyLevel(objectKey);
    for (const route of this.routesThrough(objectKey)) {
      for (const pk of this.routePaths.get(route) ?? EMPTY) {
        if (this.pathKeys.get(pk)![level] === objectKey) out.add(pk);
      }
    }
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
      const computed = route ? this.computeRoutePaths(route) : [];
      const prev = this.routePaths.get(key);
      const nextKeys = new Set<string>();
      let changed = false;
      for (const c of computed) {
        if (nextKeys.has(c.key)) continue; // two parentRefs reaching the same listener
        nextKeys.add(c.key);
        const had = prev?.has(c.key) ? this.paths.get(c.key) : undefined;
        if (!had) {
          this.indexPath(c);
          changed = true;
          delta.added.push(c.key);
        } else if (had.gatewayClass !== c.ref.gatewayClass) {
          // The gateway moved to another class: same key, other parents.
          this.unindexPath(c.key);
          this.indexPath(c);
          changed = true;
          delta.removed.push(c.key);
          delta.added.push(c.key);
        }
      }
      if (prev) {
        for (const pk of prev) {
          if (!nextKeys.has(pk)) {
            changed = true;
            this.unindexPath(pk);
            delta.removed.push(pk);
          }
        }
      }
      if (nextKeys.size > 0) this.routePaths.set(key, nextKeys);
      else this.routePaths.delete(key);
      if (changed) {
        delta.routes.push(key);
        this.reindexRoute(key, nextKeys);
      }
    }
    return delta;
  }

  private indexPath(c: ComputedPath): void {
    this.paths.set(c.key, c.ref);
    this.pathKeys.set(c.key, c.keys);
  }

  private unindexPath(pk: string): void {
    this.paths.delete(pk);
    this.pathKeys.delete(pk);
  }

  /** Keeps routesByObject in step with the class/gateway/listener keys of a route's paths. */
  private reindexRoute(route: string, paths: ReadonlySet<string>): void {
    const next = new Set<string>();
    for (const pk of paths) {
      const k = this.pathKeys.get(pk)!;
      next.add(k[0]);
      next.add(k[1]);
      next.add(k[2]);
    }
    const prev = this.routeUpperKeys.get(route);
    if (prev) for (const k of prev) if (!next.has(k)) deleteFrom(this.routesByObject, k, route);
    for (const k of next) if (!prev?.has(k)) addTo(this.routesByObject, k, route);
    if (next.size > 0) this.routeUpperKeys.set(route, next);
    else this.routeUpperKeys.delete(route);
  }

  private namespaceAllowed(gw: GatewayObject, l: ListenerSpec, routeNs: string): boolean {
    const from = l.allowedRoutes?.namespaces?.from ?? 'Same';
    if (from === 'All') return true;
    if (from === 'Same') return routeNs === gw.namespace;
    const sel = l.allowedRoutes?.namespaces?.selector;
    const ns = this.namespaces.get(routeNs);
    return Boolean(sel && ns && matchesSelector(sel, ns.labels));
  }

  private computeRoutePaths(route: RouteObject): ComputedPath[] {
    const out: ComputedPath[] = [];
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
          const ref: PathRef = {
            gatewayClass: gw.gatewayClassName,
            gateway: gwRef,
            listener: l.name,
            route: routeRef,
            rule: rule.name,
          };
          out.push({ key: `${lKey}|${rule.key}`, ref, keys: [cKey, gKey, lKey, rKey, rule.key] });
        }
      }
    }
    return out;
  }
}

export type ObjectKeys = [string, string, string, string, string];

interface ComputedPath {
  key: string;
  ref: PathRef;
  keys: ObjectKeys;
}

/** The object keys a path runs through, least specific first (GatewayClass .. route rule). */
export function objectKeysOfPath(p: PathRef): ObjectKeys {
  const gw = gatewayKey(p.gateway.namespace, p.gateway.name);
  const rt = routeKey(p.route.kind, p.route.namespace, p.route.name);
  return [classKey(p.gatewayClass), gw, sectionKey(gw, p.listener), rt, sectionKey(rt, p.rule)];
}

/** Index of an object key in ObjectKeys: 0 class, 1 gateway, 2 listener, 3 route, 4 rule. */
export function objectKeyLevel(objectKey: string): 0 | 1 | 2 | 3 | 4 {
  const section = objectKey.includes('#');
  if (objectKey.startsWith('GatewayClass:')) return 0;
  if (objectKey.startsWith('Gateway:')) return section ? 2 : 1;
  return section ? 4 : 3;
}
