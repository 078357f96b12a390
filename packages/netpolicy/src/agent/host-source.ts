// The source address of the node's own traffic to its pods. A NetworkPolicy never blocks a pod's own
// node (its addresses are HOST), so kubelet probes must leave the node with one of the node's
// addresses. On a bridged pod network the kernel's route to the pod subnet prefers the bridge's own
// address (`10.244.1.0/24 dev cascade0 proto kernel scope link src 10.244.1.1`), which is no node
// address: kubelet probes would be judged as the world, and an isolated pod would never become Ready.
// Mapping the bridge address to HOST instead would wave through kube-proxy's masquerade of a NodePort
// to a local backend, which leaves with that same bridge address (MASQUERADE takes the outgoing
// device's address, never the route's preferred source). So the agent rewrites the preferred source of
// those routes to the node's InternalIP of the family: the node's own traffic then comes from the node
// (HOST), masqueraded NodePort traffic still from the bridge (the world), as documented in the README.
// Only kernel routes of bridges that carry this node's pod interfaces are touched, and only their
// `src`; routed CNIs (a route per pod veth, no address on it) already use a node address. The kernel
// deletes a route whose preferred source address goes away (a node address changed): a bridge
// address's subnet without its route is routed again, with the node address there is now.
import { isIP } from 'node:net';
import type { Run } from '@cascade/bpf-datapath';
import { MAX_BRIDGE_ADDRESSES, MAX_TUNNEL_ADDRESSES } from '../cluster/node-report.ts';
import { formatPrefix, parseCidr, prefixKey } from '../engine/cidr.ts';

interface RouteJson {
  dst?: string;
  dev?: string;
  protocol?: string;
  scope?: string;
  prefsrc?: string;
  metric?: number;
  type?: string;
}
export interface LinkJson {
  ifindex?: number;
  ifname?: string;
  master?: string;
  linkinfo?: { info_kind?: string };
}
export interface AddrJson {
  ifname?: string;
  addr_info?: { local?: string; prefixlen?: number; scope?: string }[];
}

const IFNAME = /^[A-Za-z0-9_.@-]{1,15}$/;
const PREFIX = /^[0-9a-fA-F:.]+\/\d{1,3}$/;

const json = <T>(text: string): T[] => {
  try {
    const v = JSON.parse(text) as unknown;
    return Array.isArray(v) ? (v as T[]) : [];
  } catch {
    return [];
  }
};

/** One route the agent would rewrite: its prefix, device, metric, and the node address to prefer. */
export interface SourceFix {
  dst: string;
  dev: string;
  family: 4 | 6;
  metric?: number;
  from?: string;
  src: string;
}

/** The bridges that hold one of `podIfindexes` (their names). */
function podBridgesOf(links: LinkJson[], podIfindexes: ReadonlySet<number>): Set<string> {
  const bridges = new Set(links.filter((l) => l.linkinfo?.info_kind === 'bridge').map((l) => l.ifname));
  return new Set(
    links
      .filter(
        (l) => l.ifindex !== undefined && podIfindexes.has(l.ifindex) && l.master && bridges.has(l.master),
      )
      .map((l) => l.master!),
  );
}

/**
 * The global addresses of the bridges that hold one of `podIfindexes`, sorted, at most
 * MAX_BRIDGE_ADDRESSES: the source kube-proxy's MASQUERADE gives a flow it forwards to a pod on such
 * a bridge (the outgoing device's address), which the node's report says for `netpol simulate`.
 */
export function podBridgeAddresses(
  links: LinkJson[],
  addrs: AddrJson[],
  podIfindexes: ReadonlySet<number>,
): string[] {
  return globalAddresses(addrs, podBridgesOf(links, podIfindexes), MAX_BRIDGE_ADDRESSES);
}

/** The global addresses of the devices named in `devices`, sorted, at most `max`. */
function globalAddresses(addrs: AddrJson[], devices: ReadonlySet<string | undefined>, max: number): string[] {
  const out = new Set<string>();
  for (const a of addrs) {
    if (!a.ifname || !devices.has(a.ifname)) continue;
    for (const i of a.addr_info ?? [])
      if (i.local && i.scope === 'global' && isIP(i.local) !== 0) out.add(i.local);
  }
  return [...out].sort().slice(0, max);
}

/**
 * The kernel routes to pod subnets whose preferred source is not a node address, on bridges that hold
 * one of `podIfindexes`, with the node address each should prefer (plain data: tested without a kernel).
 */
export function sourceFixes(
  routes: { family: 4 | 6; list: RouteJson[] }[],
  links: LinkJson[],
  addrs: AddrJson[],
  nodeIps: readonly string[],
  podIfindexes: ReadonlySet<number>,
): SourceFix[] {
  const podBridges = podBridgesOf(links, podIfindexes);
  const local = new Set(
    addrs.flatMap((a) => (a.addr_info ?? []).map((i) => i.local).filter(Boolean) as string[]),
  );
  const out: SourceFix[] = [];
  for (const { family, list } of routes) {
    const node = nodeIps.find((ip) => isIP(ip) === family && local.has(ip));
    if (!node) continue;
    // a pod bridge's own subnets (its addresses): each must have its route
    const routed = new Set(
      list.flatMap((r) => {
        const p = r.dev && r.dst ? parseCidr(r.dst) : undefined;
        return p ? [`${r.dev} ${prefixKey(p)}`] : [];
      }),
    );
    for (const a of addrs) {
      if (!a.ifname || !podBridges.has(a.ifname) || !IFNAME.test(a.ifname)) continue;
      for (const i of a.addr_info ?? []) {
        if (!i.local || isIP(i.local) !== family || i.scope !== 'global' || i.prefixlen === undefined)
          continue;
        const net = parseCidr(`${i.local}/${i.prefixlen}`);
        if (!net || net.len === (family === 4 ? 32 : 128) || routed.has(`${a.ifname} ${prefixKey(net)}`))
          continue;
        routed.add(`${a.ifname} ${prefixKey(net)}`);
        out.push({
          dst: formatPrefix(net),
          dev: a.ifname,
          family,
          ...(family === 6 ? { metric: 256 } : {}),
          src: node,
        });
      }
    }
    for (const r of list) {
      if (r.protocol !== 'kernel' || (r.scope !== undefined && r.scope !== 'link')) continue;
      if (!r.dst || !PREFIX.test(r.dst) || !r.dev || !IFNAME.test(r.dev) || !podBridges.has(r.dev)) continue;
      if (r.type !== undefined && r.type !== 'unicast') continue;
      if (r.prefsrc && nodeIps.includes(r.prefsrc)) continue;
      out.push({
        dst: r.dst,
        dev: r.dev,
        family,
        ...(r.metric !== undefined ? { metric: r.metric } : {}),
        ...(r.prefsrc ? { from: r.prefsrc } : {}),
        src: node,
      });
    }
  }
  return out;
}

/** The node's links and addresses as `ip -j` gives them (read once per check, used by both below). */
export interface NodeInterfaces {
  links: LinkJson[];
  addrs: AddrJson[];
}

export async function readInterfaces(run: Run): Promise<NodeInterfaces> {
  const [links, addrs] = await Promise.all([
    run('ip', ['-j', '-d', 'link', 'show']),
    run('ip', ['-j', 'addr', 'show']),
  ]);
  return { links: json<LinkJson>(links), addrs: json<AddrJson>(addrs) };
}

/** Link kinds that carry a node's traffic into a pod network's overlay (flannel.1 is a vxlan). */
export const TUNNEL_KINDS: ReadonlySet<string> = new Set([
  'vxlan',
  'geneve',
  'ipip',
  'gre',
  'gretap',
  'ip6tnl',
  'ip6gre',
  'sit',
  'wireguard',
]);

/**
 * The global addresses of the node's tunnel devices (TUNNEL_KINDS), sorted, at most
 * MAX_TUNNEL_ADDRESSES: the source a packet this node sends into the overlay carries (flannel's vxlan
 * gives flannel.1 its subnet's first address; a NodePort flow kube-proxy masquerades towards another
 * node's backend leaves with it too), which every node must judge as this node. The node's report
 * says them (cluster/node-report.ts), and every agent adds them to this node's addresses.
 */
export function tunnelAddresses({ links, addrs }: NodeInterfaces): string[] {
  const tunnels = new Set(
    links.filter((l) => l.ifname && TUNNEL_KINDS.has(l.linkinfo?.info_kind ?? '')).map((l) => l.ifname),
  );
  return globalAddresses(addrs, tunnels, MAX_TUNNEL_ADDRESSES);
}

/**
 * Reads the kernel's routes and rewrites what `sourceFixes` says: the fixes it made, and the pod
 * bridges' addresses it saw (podBridgeAddresses).
 */
export async function preferNodeSource(
  run: Run,
  nodeIps: readonly string[],
  podIfindexes: ReadonlySet<number>,
  seen?: NodeInterfaces,
): Promise<{ fixes: SourceFix[]; bridgeAddresses: string[] }> {
  if (!podIfindexes.size || !nodeIps.length) return { fixes: [], bridgeAddresses: [] };
  const [v4, v6, { links: linkList, addrs: addrList }] = await Promise.all([
    run('ip', ['-4', '-j', 'route', 'show', 'table', 'main']),
    run('ip', ['-6', '-j', 'route', 'show', 'table', 'main']),
    seen ?? readInterfaces(run),
  ]);
  const fixes = sourceFixes(
    [
      { family: 4, list: json<RouteJson>(v4) },
      { family: 6, list: json<RouteJson>(v6) },
    ],
    linkList,
    addrList,
    nodeIps,
    podIfindexes,
  );
  for (const f of fixes)
    await run('ip', [
      `-${f.family}`,
      'route',
      'replace',
      f.dst,
      'dev',
      f.dev,
      'proto',
      'kernel',
      'scope',
      'link',
      ...(f.metric !== undefined ? ['metric', String(f.metric)] : []),
      'src',
      f.src,
    ]);
  return { fixes, bridgeAddresses: podBridgeAddresses(linkList, addrList, podIfindexes) };
}
