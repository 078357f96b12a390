// The end-to-end suite on three nodes (npm run cluster -- up --nodes 3): each node its own network
// and mount namespace with its own kubelet, containerd, kube-proxy, flanneld (vxlan) and agent. Runs
// after the one-node suite (this project's files run one at a time: they share the machine); with
// CI=true it fails rather than skips when it cannot run.
import { existsSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { clusterDownLeavesNothing } from './e2e/lifecycle.ts';
import { drainAndAddNode, nodeFailure } from './e2e/node-churn.ts';
import { nodePortAcrossNodes } from './e2e/nodeports.ts';
import { crossNodeEnforcement, NODES, ownNodeIsANode, stopServers, threeNodesUp } from './e2e/nodes.ts';
import { clusterNetworkPolicyUpgrade } from './e2e/npapi-upgrade.ts';
import { figures } from './e2e/shared.ts';
import { CLUSTER_SH, clusterTestsEnabled, sh } from './harness.ts';

const enabled = clusterTestsEnabled();
const LAYOUT = '/var/lib/cascade-cluster/layout.json';

describe.runIf(enabled)(`Cascade on ${NODES} nodes`, () => {
  beforeAll(() => {
    // a cluster of another shape (the one-node suite's, kept) goes first: node counts only grow
    if (existsSync(LAYOUT) && (JSON.parse(readFileSync(LAYOUT, 'utf8')) as { count: number }).count !== NODES)
      sh('bash', [CLUSTER_SH, 'down'], { timeoutMs: 300_000 });
  }, 400_000);

  afterAll(() => {
    if (!enabled) return;
    stopServers();
    process.stdout.write(`e2e (${NODES} nodes) figures: ${JSON.stringify(figures)}\n`);
    if (process.env.CASCADE_E2E_KEEP !== '1' && existsSync('/run/cascade-cluster'))
      sh('bash', [CLUSTER_SH, 'down'], { timeoutMs: 300_000 });
  }, 400_000);

  it(
    `npm run cluster -- up --nodes ${NODES}: every node Ready in its own namespaces, an agent Ready on each with its own pins`,
    threeNodesUp,
    25 * 60_000,
  );
  it(
    'examples/netpol spread over the nodes: every connection between pods on different nodes, and to and from each node, gets the verdict netpol simulate --kubeconfig gives; each node holds its own pods; traces agree',
    crossNodeEnforcement,
    300_000,
  );
  it(
    "network-policy-api v0.2.0's CRDs upgraded to the chart's v0.3.0 (ClusterNetworkPolicy v1beta1) under a probe loop across nodes, agents and controller restarted: no wrong verdict before, during or after; a network v1beta1 would refuse keeps its meaning and gets an Event",
    clusterNetworkPolicyUpgrade,
    600_000,
  );
  it(
    "a pod's own node is a node like any other to an admin policy (a nodes peer denies it too); a NetworkPolicy cannot block it",
    ownNodeIsANode,
    180_000,
  );
  it(
    "NodePorts dialled on a node without the backend: judged by the backend's ingress with the source the packet carries (the dialled node under masquerade), never as the backend's own node; as netpol simulate says",
    nodePortAcrossNodes,
    300_000,
  );
  it(
    'a node stops (kubelet, containerd, kube-proxy, agent) under a probe loop: no wrong verdict on the others; its pods leave the other agents when evicted; back, its agent adopts its pins without a wrong verdict',
    nodeFailure,
    600_000,
  );
  it(
    'kubectl drain of a node under a probe loop: its pods leave every agent, no wrong verdict; a fourth node joins the running cluster and its pods are judged as simulate says',
    drainAndAddNode,
    900_000,
  );
  it.skipIf(process.env.CASCADE_E2E_KEEP === '1')(
    'npm run cluster -- down leaves nothing behind: namespaces, cgroups, links, processes, mounts, routes, pins, state',
    clusterDownLeavesNothing,
    300_000,
  );
});
