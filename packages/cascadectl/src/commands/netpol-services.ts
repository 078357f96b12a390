// A Service as the destination of `netpol simulate` and `netpol explain` (`svc:ns/name`, or one of its
// ClusterIPs): the flow is answered per backend, as the datapath sends it: the Service port's ready
// endpoints (else serving-and-terminating ones; internalTrafficPolicy Local: the source's node), the
// source pod itself skipped when there is another backend, and each backend judged on its own port.
import { type NetpolEngine, PROTO_NAMES, type ServiceCatalog } from '@cascade/netpolicy';
import { UsageError } from '../cli.ts';
import type { ReportedAddresses } from '../netpol-world.ts';

export interface ServiceHop {
  /** `ns/name:port` */
  service: string;
  /** the ClusterIP (or node address, for a NodePort) and port dialled */
  frontend: string;
  backends: { addr: string; port: number; name: string; node?: string }[];
  /**
   * A NodePort dialled on a node other than the source's own: kube-proxy on that node forwards it,
   * masquerading (externalTrafficPolicy Cluster), so the backend is judged with the source the packet
   * then carries. The flow leaves the source as a connection to the node's address and port.
   */
  forwardedBy?: { node: string; addr: string; port: number };
  /** why there is no backend to judge, when there is none */
  note?: string;
}

const isAddress = (x: string) => /^[0-9.:a-fA-F]+$/.test(x) && (x.includes('.') || x.includes(':'));

/**
 * The Service `to` names (undefined: not a Service, judge `to` itself). `port`: the Service port, a
 * number or its name.
 */
export function serviceDestination(
  engine: NetpolEngine,
  services: ServiceCatalog,
  src: string,
  to: string,
  proto: number,
  port: string,
): ServiceHop | undefined {
  const named = to.startsWith('svc:');
  const ref = named ? to.slice(4) : to;
  if (!named && !isAddress(ref)) return undefined;
  if (!named && /^\d+$/.test(port)) {
    const np = nodePortDestination(engine, services, src, ref, proto, Number(port));
    if (np) return np;
  }
  const svc = services.find(ref);
  if (!svc) {
    if (named) throw new UsageError(`${to}: no such Service (give its Service and EndpointSlice objects)`);
    return undefined;
  }
  const key = `${svc.namespace}/${svc.name}`;
  const srcPod = engine.podAt(src);
  const protoName = PROTO_NAMES[proto] ?? String(proto);
  const sp = svc.ports.find(
    (p) => p.protocol === protoName && (/^\d+$/.test(port) ? p.port === Number(port) : p.name === port),
  );
  if (!sp)
    throw new UsageError(
      `--port ${port}: Service ${key} has no ${protoName} port of that number or name (it has ${svc.ports.map((p) => `${p.name ? `${p.name}=` : ''}${p.port}/${p.protocol}`).join(', ') || 'none'})`,
    );
  const v6 = src.includes(':');
  const fronts = services
    .frontends(srcPod?.node)
    .filter((f) => !f.nodePort && f.service === `${key}:${sp.name || sp.port}` && f.port === sp.port);
  const f = fronts.find((x) => x.addr === ref) ?? fronts.find((x) => x.addr.includes(':') === v6);
  if (!f) throw new UsageError(`${to}: Service ${key} has no ClusterIP of the source's address family`);
  const hop: ServiceHop = { service: f.service, frontend: `${f.addr}:${f.port}`, backends: [] };
  if (!f.backends.length)
    return {
      ...hop,
      note: 'no ready endpoint: the datapath leaves the flow to kube-proxy, which rejects it',
    };
  const others = f.backends.filter((b) => b.addr !== src);
  if (!others.length)
    return { ...hop, note: 'the source is the only backend: allowed, as a pod reaching itself' };
  hop.backends = others.map((b) => ({ addr: b.addr, port: b.port, name: b.pod ?? b.addr }));
  return hop;
}

/**
 * A node's address and one of the cluster's NodePorts. Dialled by a pod on that node, the datapath
 * translates it as it does a ClusterIP (source kept, each backend judged). Dialled from anywhere else
 * (a pod on another node, an address outside the cluster), it reaches the node and kube-proxy there
 * forwards it with masquerade: a backend on another node sees the dialled node's address and judges
 * it as that node (its `nodes` peers, the ipBlocks holding its address); a backend on the dialled node
 * sees the node's pod-bridge address (its NetpolNodeReport says it; unknown, the world's address), an
 * address outside every pod and node: only an ipBlock holding it can admit it.
 * Never as the backend's own node (always allowed): that would let anyone reach any backend.
 */
function nodePortDestination(
  engine: NetpolEngine,
  services: ServiceCatalog,
  src: string,
  addr: string,
  proto: number,
  port: number,
): ServiceHop | undefined {
  const node = engine.nodeAt(addr);
  if (!node) return undefined;
  const srcPod = engine.podAt(src);
  const local = srcPod?.node === node.name;
  const f = services
    .frontends(local ? node.name : undefined)
    .find(
      (x) =>
        x.nodePort && x.port === port && x.proto === proto && x.addr.includes(':') === addr.includes(':'),
    );
  if (!f) return undefined;
  const hop: ServiceHop = { service: f.service, frontend: `${addr}:${port}`, backends: [] };
  if (!local) hop.forwardedBy = { node: node.name, addr, port };
  if (!f.backends.length) return { ...hop, note: 'no ready endpoint: kube-proxy rejects the flow' };
  const others = f.backends.filter((b) => b.addr !== src);
  if (!others.length)
    return { ...hop, note: 'the source is the only backend: allowed, as a pod reaching itself' };
  hop.backends = others.map((b) => {
    // the backend's node: its EndpointSlice's word, else its pod's
    const at = b.node ?? engine.podAt(b.addr)?.node;
    return { addr: b.addr, port: b.port, name: b.pod ?? b.addr, ...(at ? { node: at } : {}) };
  });
  return hop;
}

/**
 * The source a backend of a forwarded NodePort flow sees (see nodePortDestination). MASQUERADE takes
 * the outgoing device's address, as the dialled node's NetpolNodeReport says it (`reported`): for a
 * backend elsewhere, that node's tunnel address of the family when it has one (an overlay such as
 * flannel's vxlan carries the flow), else its own address; for a backend on the dialled node, that
 * node's pod-bridge address of the family, else the world's address, judged alike by every rule but
 * an ipBlock holding it.
 */
export function masqueradedSource(
  hop: ServiceHop,
  backendNode: string | undefined,
  reported?: ReportedAddresses,
): string {
  const f = hop.forwardedBy!;
  const v6 = f.addr.includes(':');
  // a backend whose node is unknown is judged as the world: never as its own node, which is allowed
  if (backendNode === undefined) return v6 ? '::' : '0.0.0.0';
  const family = (list?: readonly string[]) => list?.find((a) => a.includes(':') === v6);
  if (backendNode !== f.node) return family(reported?.tunnels.get(f.node)) ?? f.addr;
  return family(reported?.bridges.get(f.node)) ?? (v6 ? '::' : '0.0.0.0');
}
