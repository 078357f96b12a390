// flannel as a node's CNI (`up --cni flannel`): flanneld (built from its Go module) on every node with
// the vxlan backend and its subnet lease through the API server (--kube-subnet-mgr: the lease is the
// Node's spec.podCIDR, the VTEP in its annotations), and the CNI configuration a flannel node has
// (kube-flannel.yml's cni-conf.json: the flannel plugin, which delegates to bridge + host-local over
// flanneld's subnet.env, then portmap). Cascade's agent chains cascade-cni after them itself
// (agent.cni.chain), as on a user's node: nothing of Cascade is written here.
//
// The node's pod subnet is given here (the cluster's IPAM, as kube-controller-manager's
// --allocate-node-cidrs would): node i gets 10.244.i.0/24, so the host (which is no node: the
// control plane runs on it) keeps its route to each node's pods through that node.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BRIDGE, type NodeSpec, POD_RANGE } from './layout.ts';
import { clientPki, kubeconfig } from './pki.ts';
import { fail, run, type Stoppable, start, waitFor } from './proc.ts';

export type Cni = 'host-gw' | 'flannel';
export const CNIS: readonly Cni[] = ['host-gw', 'flannel'];

/** The file flanneld writes its lease to and the flannel plugin reads (per node: /run is shared). */
export const subnetFile = (n: NodeSpec) => join(n.run, 'flannel/subnet.env');
const pidFile = (n: NodeSpec) => join(n.run, 'flanneld.pid');

/** The flannel plugin's CNI configuration, as kube-flannel.yml installs it. */
export function flannelConflist(n: NodeSpec): string {
  return `${JSON.stringify(
    {
      name: 'cbr0',
      cniVersion: '0.3.1',
      plugins: [
        {
          type: 'flannel',
          subnetFile: subnetFile(n),
          dataDir: join(n.run, 'flannel/cni'),
          // host-local's leases stay the node's own (its default directory is the host's, shared)
          ipam: { dataDir: join(n.dir, 'cni/ipam') },
          // the harness's pod bridge (the node's ClusterIP route points at it before any pod runs);
          // flannel's default is cni0, a name nothing here depends on
          delegate: { bridge: BRIDGE, hairpinMode: true, isDefaultGateway: true },
        },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    },
    null,
    2,
  )}\n`;
}

/** flanneld's network configuration (kube-flannel-cfg's net-conf.json): the pod range, vxlan. */
export const netConf = () => `${JSON.stringify({ Network: POD_RANGE, Backend: { Type: 'vxlan' } })}\n`;

/** flanneld's identity: its client certificate's common name and file stem. */
const FLANNEL_USER = 'cascade-flannel';

/** The identity and the rights flanneld has (kube-flannel.yml's ClusterRole), once per cluster. */
export function flannelAccess(kubectlApply: (yaml: string) => void): void {
  const user = clientPki(FLANNEL_USER, FLANNEL_USER);
  kubectlApply(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: flannel}
rules:
  - {apiGroups: [""], resources: [pods], verbs: [get]}
  - {apiGroups: [""], resources: [nodes], verbs: [get, list, watch]}
  - {apiGroups: [""], resources: [nodes/status], verbs: [patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: flannel}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: flannel}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: ${user}}]
`);
}

/**
 * flanneld on the node (in its namespaces), once its Node is registered and has its pod subnet;
 * waits for its lease (subnet.env). `kubectl` runs against the cluster as admin.
 */
export function flanneldUp(
  n: NodeSpec,
  bin: string,
  server: string,
  kubectl: (...args: string[]) => string,
  enter?: number,
): void {
  const kc = kubeconfig(FLANNEL_USER, FLANNEL_USER, server);
  waitFor(120, `node ${n.name} registered`, () => kubectl('get', 'node', n.name, '-o', 'name'));
  const cidr = kubectl('get', 'node', n.name, '-o', 'jsonpath={.spec.podCIDR}').trim();
  if (!cidr)
    kubectl(
      'patch',
      'node',
      n.name,
      '--type=merge',
      '-p',
      JSON.stringify({ spec: { podCIDR: n.podCidr, podCIDRs: [n.podCidr] } }),
    );
  else if (cidr !== n.podCidr)
    fail(`node ${n.name}: spec.podCIDR is ${cidr}, this cluster gives it ${n.podCidr} (down, then up)`);
  mkdirSync(join(n.run, 'flannel'), { recursive: true });
  const conf = join(n.hostDir, 'flannel-net-conf.json');
  writeFileSync(conf, netConf());
  start({
    pidFile: pidFile(n),
    logFile: join(n.hostDir, 'logs', 'flanneld.log'),
    cmd: join(bin, 'flanneld'),
    args: [
      '--kube-subnet-mgr',
      `--kubeconfig-file=${kc}`,
      `--net-config-path=${conf}`,
      `--subnet-file=${subnetFile(n)}`,
      '--iface=eth0',
      '--ip-masq',
      '--v=1',
    ],
    env: { ...process.env, NODE_NAME: n.name },
    enter,
  });
  waitFor(60, `flanneld's lease on ${n.name} (${subnetFile(n)})`, () =>
    run('grep', ['-q', `FLANNEL_SUBNET=`, subnetFile(n)]),
  );
}

/** flanneld, to stop with the node's other services. */
export const flanneld = (n: NodeSpec, graceMs = 10_000): Stoppable => ({
  pidFile: pidFile(n),
  match: 'flanneld',
  graceMs,
});
