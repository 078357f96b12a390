// A Service as the destination of `netpol simulate` and `netpol explain` (`svc:ns/name`, or one of its
// ClusterIPs): the flow is answered per backend, as the datapath sends it: the Service port's ready
// endpoints (else serving-and-terminating ones; internalTrafficPolicy Local: the source's node), the
// source pod itself skipped when there is another backend, and each backend judged on its own port.
import { type NetpolEngine, PROTO_NAMES, type ServiceCatalog } from '@cascade/netpolicy';
import { UsageError } from '../cli.ts';

export interface ServiceHop {
  /** `ns/name:port` */
  service: string;
  /** the ClusterIP and port dialled */
  frontend: string;
  backends: { addr: string; port: number; name: string }[];
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
