// Services and EndpointSlices as the datapath needs them: the frontends (each ClusterIP and NodePort
// of a Service, per port and protocol) and the backends a pod's new flow may be sent to, chosen as
// kube-proxy chooses them: ready endpoints; when none is ready, serving-and-terminating ones; with
// internalTrafficPolicy Local only the node's own endpoints for ClusterIPs. Headless Services and
// ExternalName need nothing (DNS only); externalIPs and load-balancer addresses are left to kube-proxy.
// Services and EndpointSlices are written by namespaced users (not trusted): every field is checked
// and bounded here, and translation never grants anything: the flow is judged against the backend it
// goes to, by the policies of both ends, exactly as if the pod had dialled the backend itself.
import { type DesiredService, NODEPORT_ADDR } from '@cascade/bpf-datapath/layout';
import { hostPrefix } from './cidr.ts';
import {
  applyServiceBudget,
  DEFAULT_SERVICE_BUDGET,
  type RefusedService,
  type ServiceBudget,
  type ServiceCapacity,
} from './service-budget.ts';

const PROTO = { TCP: 6, UDP: 17, SCTP: 132 } as const;
type Protocol = keyof typeof PROTO;
/** Endpoints one EndpointSlice may list (the API server's own limit). */
const MAX_SLICE_ENDPOINTS = 1000;
/** Ports one Service or EndpointSlice may list (the API server's own limit is 100 per slice). */
const MAX_PORTS = 100;

export interface ServicePort {
  name: string;
  protocol: Protocol;
  port: number;
  nodePort?: number;
}
export interface Service {
  namespace: string;
  name: string;
  clusterIPs: string[];
  ports: ServicePort[];
  /** internalTrafficPolicy Local: ClusterIP flows go to the node's own endpoints only */
  localOnly: boolean;
  /** metadata.creationTimestamp: a node's Service maps admit the oldest first (service-budget.ts) */
  created?: string;
}
export interface SliceEndpoint {
  addresses: string[];
  ready: boolean;
  serving: boolean;
  terminating: boolean;
  node?: string;
  /** the backend pod (`ns/name`), when the slice says */
  pod?: string;
}
export interface EndpointSlice {
  namespace: string;
  name: string;
  service: string;
  ports: { name: string; protocol: Protocol; port: number }[];
  endpoints: SliceEndpoint[];
}

type Raw = {
  metadata?: { name?: unknown; namespace?: unknown; labels?: unknown; creationTimestamp?: unknown };
  spec?: unknown;
};
const isObj = (x: unknown): x is Record<string, unknown> =>
  typeof x === 'object' && x !== null && !Array.isArray(x);
const str = (x: unknown) => (typeof x === 'string' ? x : undefined);
const port = (x: unknown) =>
  Number.isInteger(x) && (x as number) > 0 && (x as number) < 65536 ? (x as number) : undefined;
const protocol = (x: unknown): Protocol | undefined =>
  x === undefined ? 'TCP' : x === 'TCP' || x === 'UDP' || x === 'SCTP' ? x : undefined;
const ip = (x: unknown) => {
  const s = str(x);
  return s && s.length <= 45 && hostPrefix(s) ? s : undefined;
};

/** Kubernetes Service -> Service; undefined for kinds that need nothing (headless, ExternalName). */
export function serviceFromObject(o: Raw): Service | undefined | { error: string } {
  const name = str(o.metadata?.name);
  const namespace = str(o.metadata?.namespace) ?? 'default';
  if (!name) return { error: 'metadata.name: required' };
  const spec = isObj(o.spec) ? o.spec : {};
  if (spec.type === 'ExternalName') return undefined;
  const raw = Array.isArray(spec.clusterIPs)
    ? spec.clusterIPs
    : spec.clusterIP !== undefined
      ? [spec.clusterIP]
      : [];
  if (raw.includes('None') || raw.length === 0) return undefined;
  const clusterIPs: string[] = [];
  for (const [i, a] of raw.slice(0, 2).entries()) {
    const v = ip(a);
    if (!v) return { error: `spec.clusterIPs[${i}]: not an IP address` };
    clusterIPs.push(v);
  }
  const ports: ServicePort[] = [];
  const list = Array.isArray(spec.ports) ? spec.ports : [];
  if (list.length > MAX_PORTS) return { error: `spec.ports: more than ${MAX_PORTS}` };
  for (const [i, p] of list.entries()) {
    if (!isObj(p)) return { error: `spec.ports[${i}]: not an object` };
    const proto = protocol(p.protocol);
    const n = port(p.port);
    if (!proto) return { error: `spec.ports[${i}].protocol: TCP, UDP or SCTP` };
    if (!n) return { error: `spec.ports[${i}].port: 1-65535` };
    const np = p.nodePort === undefined || p.nodePort === 0 ? undefined : port(p.nodePort);
    if (p.nodePort !== undefined && p.nodePort !== 0 && !np)
      return { error: `spec.ports[${i}].nodePort: 1-65535` };
    const withNodePort = spec.type === 'NodePort' || spec.type === 'LoadBalancer';
    ports.push({
      name: str(p.name) ?? '',
      protocol: proto,
      port: n,
      ...(np && withNodePort ? { nodePort: np } : {}),
    });
  }
  const created = str(o.metadata?.creationTimestamp);
  return {
    namespace,
    name,
    clusterIPs,
    ports,
    localOnly: spec.internalTrafficPolicy === 'Local',
    ...(created ? { created } : {}),
  };
}

/** discovery.k8s.io/v1 EndpointSlice -> EndpointSlice (its Service from kubernetes.io/service-name). */
export function sliceFromObject(
  o: Raw & { endpoints?: unknown; ports?: unknown; addressType?: unknown },
): EndpointSlice | undefined | { error: string } {
  const name = str(o.metadata?.name);
  const namespace = str(o.metadata?.namespace) ?? 'default';
  if (!name) return { error: 'metadata.name: required' };
  const labels = isObj(o.metadata?.labels) ? o.metadata.labels : {};
  const service = str(labels['kubernetes.io/service-name']);
  if (!service) return undefined; // not a Service's slice
  if (o.addressType !== 'IPv4' && o.addressType !== 'IPv6') return undefined; // FQDN: nothing to translate to
  const ports: EndpointSlice['ports'] = [];
  const rawPorts = Array.isArray(o.ports) ? o.ports : [];
  if (rawPorts.length > MAX_PORTS) return { error: `ports: more than ${MAX_PORTS}` };
  for (const [i, p] of rawPorts.entries()) {
    if (!isObj(p)) return { error: `ports[${i}]: not an object` };
    const proto = protocol(p.protocol);
    const n = port(p.port);
    if (!proto || !n) return { error: `ports[${i}]: a protocol (TCP, UDP, SCTP) and a port 1-65535` };
    ports.push({ name: str(p.name) ?? '', protocol: proto, port: n });
  }
  const endpoints: SliceEndpoint[] = [];
  const raw = Array.isArray(o.endpoints) ? o.endpoints : [];
  if (raw.length > MAX_SLICE_ENDPOINTS) return { error: `endpoints: more than ${MAX_SLICE_ENDPOINTS}` };
  for (const [i, e] of raw.entries()) {
    if (!isObj(e)) return { error: `endpoints[${i}]: not an object` };
    const addrs = (Array.isArray(e.addresses) ? e.addresses : []).slice(0, 100).map(ip);
    if (addrs.some((a) => !a)) return { error: `endpoints[${i}].addresses: not an IP address` };
    const c = isObj(e.conditions) ? e.conditions : {};
    // unset ready means ready (the API's rule); unset serving follows ready
    const ready = c.ready !== false;
    const ref = isObj(e.targetRef) && e.targetRef.kind === 'Pod' ? e.targetRef : undefined;
    endpoints.push({
      addresses: addrs as string[],
      ready,
      serving: c.serving === undefined ? ready : c.serving === true,
      terminating: c.terminating === true,
      ...(str(e.nodeName) ? { node: str(e.nodeName)! } : {}),
      ...(ref && str(ref.name) ? { pod: `${str(ref.namespace) ?? namespace}/${str(ref.name)}` } : {}),
    });
  }
  return { namespace, name, service, ports, endpoints };
}

export interface Backend {
  addr: string;
  port: number;
  pod?: string;
  node?: string;
}
export interface Frontend {
  /** `ns/name:port` (the Service port's name, or its number) */
  service: string;
  /** the Service: `ns/name` */
  key: string;
  addr: string;
  port: number;
  proto: number;
  nodePort: boolean;
  backends: Backend[];
}

interface Built {
  /** every frontend the Services make */
  frontends: Frontend[];
  /** those the node's budgets admit (service-budget.ts) */
  admitted: Frontend[];
  refused: RefusedService[];
  desired?: DesiredService[];
  untranslated?: string[];
}

/**
 * The cluster's Services and EndpointSlices, the frontends they make, and which of them a node's
 * Service maps hold (per-namespace budgets, see service-budget.ts).
 */
export class ServiceCatalog {
  private readonly services = new Map<string, Service>();
  private readonly slices = new Map<string, EndpointSlice>();
  /** by node ('' for all): memoised until the next change */
  private cache = new Map<string, Built>();
  private byClusterIP?: Map<string, Service>;
  private readonly budget: ServiceBudget;
  private readonly capacity?: ServiceCapacity;
  /** A namespace's tenant (tenants.ts): the unit the budget is shared by; the namespace by default. */
  private tenantOf: (namespace: string) => string = (ns) => ns;

  constructor(budget: ServiceBudget = DEFAULT_SERVICE_BUDGET, capacity?: ServiceCapacity) {
    this.budget = budget;
    if (capacity) this.capacity = capacity;
  }

  upsertService(s: Service): void {
    this.services.set(`${s.namespace}/${s.name}`, s);
    this.changed();
  }
  removeService(namespace: string, name: string): void {
    if (this.services.delete(`${namespace}/${name}`)) this.changed();
  }
  upsertSlice(s: EndpointSlice): void {
    this.slices.set(`${s.namespace}/${s.name}`, s);
    this.changed();
  }
  removeSlice(namespace: string, name: string): void {
    if (this.slices.delete(`${namespace}/${name}`)) this.changed();
  }
  private changed(): void {
    this.cache.clear();
    this.byClusterIP = undefined;
  }

  /** Sets how namespaces group into tenants (call again when a namespace's tenant changes). */
  setTenants(tenantOf: (namespace: string) => string): void {
    this.tenantOf = tenantOf;
    this.changed();
  }

  get size(): number {
    return this.services.size;
  }

  /** Applies one watched or loaded object (Service or EndpointSlice); an error names the field. */
  apply(kind: 'Service' | 'EndpointSlice', o: Raw, deleted = false): string | undefined {
    const name = str(o.metadata?.name) ?? '';
    const ns = str(o.metadata?.namespace) ?? 'default';
    const remove = () => (kind === 'Service' ? this.removeService(ns, name) : this.removeSlice(ns, name));
    const v = deleted ? undefined : kind === 'Service' ? serviceFromObject(o) : sliceFromObject(o);
    // a deleted object, one that needs nothing, or a bad one (dropped whole, never half-applied)
    if (!v || 'error' in v) {
      remove();
      return v ? `${kind} ${ns}/${name}: ${v.error}` : undefined;
    }
    if (kind === 'Service') this.upsertService(v as Service);
    else this.upsertSlice(v as EndpointSlice);
    return undefined;
  }

  private built(node?: string): Built {
    const k = node ?? '';
    let c = this.cache.get(k);
    if (!c) {
      const frontends = this.build(node);
      c = {
        frontends,
        ...applyServiceBudget(frontends, this.budget, this.capacity, {
          tenantOf: this.tenantOf,
          createdOf: (key) => this.services.get(key)?.created ?? '',
        }),
      };
      this.cache.set(k, c);
    }
    return c;
  }

  /** Every frontend with the backends a pod on `node` may be sent to (every node when undefined). */
  frontends(node?: string): Frontend[] {
    return this.built(node).frontends;
  }

  /** The Services the node's budgets leave out of its maps, with the reason (memoised). */
  refused(node?: string): RefusedService[] {
    return this.built(node).refused;
  }

  /** The ClusterIPs of the refused Services: known frontends the datapath does not translate. */
  untranslated(node?: string): string[] {
    const c = this.built(node);
    c.untranslated ??= c.refused.flatMap((r) => r.clusterIPs);
    return c.untranslated;
  }

  private build(node?: string): Frontend[] {
    const slicesOf = new Map<string, EndpointSlice[]>();
    for (const s of this.slices.values()) {
      const k = `${s.namespace}/${s.service}`;
      const l = slicesOf.get(k);
      if (l) l.push(s);
      else slicesOf.set(k, [s]);
    }
    const out: Frontend[] = [];
    const keys = [...this.services.keys()].sort();
    for (const key of keys) {
      const svc = this.services.get(key)!;
      for (const p of svc.ports) {
        const all = backendsOf(slicesOf.get(key) ?? [], p, undefined);
        const local =
          svc.localOnly && node !== undefined ? backendsOf(slicesOf.get(key) ?? [], p, node) : all;
        const label = `${key}:${p.name || p.port}`;
        for (const addr of svc.clusterIPs) {
          const v6 = addr.includes(':');
          const fam = (b: Backend) => b.addr.includes(':') === v6;
          out.push({
            service: label,
            key,
            addr,
            port: p.port,
            proto: PROTO[p.protocol],
            nodePort: false,
            backends: local.filter(fam),
          });
          if (p.nodePort)
            out.push({
              service: label,
              key,
              addr: NODEPORT_ADDR[v6 ? 6 : 4],
              port: p.nodePort,
              proto: PROTO[p.protocol],
              nodePort: true,
              backends: all.filter(fam),
            });
        }
      }
    }
    return out;
  }

  /**
   * The datapath's Service maps for the agent on `node` (memoised until the next change: the same array
   * again, which the loader recognises). Lists longer than the datapath takes are cut by the loader,
   * which reports them.
   */
  desired(node?: string): DesiredService[] {
    const c = this.built(node);
    c.desired ??= c.admitted.map((f) => ({
      addr: f.addr,
      port: f.port,
      proto: f.proto,
      name: f.service,
      backends: f.backends.map((b) => ({ addr: b.addr, port: b.port })),
    }));
    return c.desired;
  }

  /** A Service by `ns/name`, or the Service that owns a ClusterIP. */
  find(ref: string): Service | undefined {
    const byName = this.services.get(ref);
    if (byName) return byName;
    if (!this.byClusterIP) {
      this.byClusterIP = new Map();
      for (const s of this.services.values()) for (const ip of s.clusterIPs) this.byClusterIP.set(ip, s);
    }
    return this.byClusterIP.get(ref);
  }
}

/**
 * The backends of one Service port, as kube-proxy picks them: ready endpoints, else serving and
 * terminating ones. `node`: only that node's endpoints.
 */
function backendsOf(slices: EndpointSlice[], p: ServicePort, node: string | undefined): Backend[] {
  const pick = (want: (e: SliceEndpoint) => boolean) => {
    const out: Backend[] = [];
    for (const s of slices) {
      const sp = s.ports.find((x) => x.name === p.name && x.protocol === p.protocol);
      if (!sp) continue;
      for (const e of s.endpoints) {
        if (!want(e)) continue;
        if (node !== undefined && e.node !== node) continue;
        for (const addr of e.addresses)
          out.push({
            addr,
            port: sp.port,
            ...(e.pod ? { pod: e.pod } : {}),
            ...(e.node ? { node: e.node } : {}),
          });
      }
    }
    return out;
  };
  const ready = pick((e) => e.ready);
  return ready.length ? ready : pick((e) => e.serving && e.terminating);
}
