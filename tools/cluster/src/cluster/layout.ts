// Where the cluster's parts live and how its nodes are addressed: plain data, no side effects.
//
// One node (the default) runs on the host, as the cluster always did: its kubelet, containerd and
// kube-proxy are host processes and its pod bridge is the host's. Two or more nodes each get their own
// network namespace and mount namespace, as separate machines would: the node's interfaces, routes,
// iptables, bpffs (so its pins) and its /run/cascade are its own. The nodes share one L2 link (a
// bridge on the host, 10.250.0.0/24) and route each other's pod subnets over it (host-gw).
import { join } from 'node:path';

export const STATE = process.env.CASCADE_CLUSTER_STATE ?? '/var/lib/cascade-cluster';
export const RUN = process.env.CASCADE_CLUSTER_RUN ?? '/run/cascade-cluster';
export const KUBECONFIG = join(STATE, 'admin.kubeconfig');
export const PKI = join(STATE, 'pki');
export const LOGS = join(STATE, 'logs');
export const POD_RANGE = '10.244.0.0/16';
export const SVC_RANGE = '10.96.0.0/16';
export const API_SVC_IP = '10.96.0.1';
export const DNS_IP = '10.96.0.10';
/** The pod bridge, on the host (one node) or in each node's namespace. */
export const BRIDGE = 'cascade0';
export const PIN_DIR = '/sys/fs/bpf/cascade';
export const ETCD_PORT = 23790;
/** The nodes' shared link: a bridge on the host holding the host end of each node's veth. */
export const LINK_BRIDGE = 'cascade-link';
export const LINK_HOST_IP = '10.250.0.1';
export const LINK_PREFIX_LEN = 24;
/** Where a namespaced node's own directory appears inside its mount namespace. */
export const NODE_VIEW = join(STATE, 'node');
/** Directories a namespaced node holds its own copy of (bind mounts in its mount namespace). */
export const NODE_PRIVATE_DIRS = ['/run/cascade', '/run/netns', '/var/log/pods', '/var/log/containers'];
export const MAX_NODES = 8;

export type Placement = 'host' | 'netns';

export interface NodeSpec {
  name: string;
  /** 0 for the host node, 1.. for namespaced nodes */
  index: number;
  placement: Placement;
  /** its InternalIP: the host's address, or its address on the link */
  ip: string;
  podCidr: string;
  gateway: string;
  /** its directory as the host sees it */
  hostDir: string;
  /** the same directory as the node's own processes see it (NODE_VIEW for namespaced nodes) */
  dir: string;
  /** pid files and sockets (host path; /run/cascade-cluster is not remapped) */
  run: string;
  /** network namespace name (namespaced nodes) */
  netns?: string;
  /** its cgroup root (namespaced nodes): kubelet --cgroup-root */
  cgroupRoot?: string;
}

export interface Layout {
  hostIp: string;
  nodes: NodeSpec[];
}

/** The nodes of a cluster of `count` nodes on a host whose address is `hostIp`. */
export function layout(count: number, hostIp: string): Layout {
  if (!Number.isInteger(count) || count < 1 || count > MAX_NODES)
    throw new Error(`--nodes: want 1 to ${MAX_NODES}, got ${count}`);
  if (count === 1)
    return {
      hostIp,
      nodes: [
        {
          name: 'cascade-node',
          index: 0,
          placement: 'host',
          ip: hostIp,
          podCidr: '10.244.0.0/24',
          gateway: '10.244.0.1',
          hostDir: STATE,
          dir: STATE,
          run: RUN,
        },
      ],
    };
  const nodes: NodeSpec[] = [];
  for (let i = 1; i <= count; i++) nodes.push(netnsNode(i));
  return { hostIp, nodes };
}

/** The i-th namespaced node (1-based): its name, link address, pod subnet and directories. */
export function netnsNode(i: number): NodeSpec {
  const name = `cascade-node-${i}`;
  return {
    name,
    index: i,
    placement: 'netns',
    ip: `10.250.0.${10 + i}`,
    podCidr: `10.244.${i}.0/24`,
    gateway: `10.244.${i}.1`,
    hostDir: join(STATE, 'nodes', name),
    dir: NODE_VIEW,
    run: join(RUN, 'nodes', name),
    netns: name,
    cgroupRoot: `/${name}`,
  };
}

/** The chart values that depend on where nodes keep their files (the same on every node). */
export function chartPaths(l: Layout): { cniBinDir: string; cniConfDir: string; pinDir: string } {
  const n = l.nodes[0]!;
  return { cniBinDir: join(n.dir, 'cni/bin'), cniConfDir: join(n.dir, 'cni/net.d'), pinDir: PIN_DIR };
}
