// Kernel tests of a pod's own node (ipcache identity HOST) against the real BPF program: judged as the
// node's identity in the admin layer and the baseline, never blocked by a NetworkPolicy's entries,
// cached apart from remote nodes that share the identity, and always allowed while the identity is 0.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EP_FLAGS, ID, TEST_RUN_IFINDEX } from './codecs.ts';
import type { Datapath } from './loader.ts';
import type { DesiredState, TableEntry } from './state.ts';
import { entry as e, freshDatapath, kernelTestsEnabled, kernelVerdict, referenceOf } from './testing.ts';

const ISOLATED = '10.0.0.1'; // a pod a NetworkPolicy isolates both ways
const OPEN = '10.0.0.2'; // a pod under the baseline only
const NODE = '10.250.0.11'; // this node's own address: HOST
const PEER_NODE = '10.250.0.12'; // another node with the same labels: the same node identity
const ID_NODE = 0x01000000;
const ID_POD = 300;
const both = EP_FLAGS.ENFORCE_INGRESS | EP_FLAGS.ENFORCE_EGRESS;
// precedences as netpolicy lowers them (precedence.ts): admin rank r = (32767 - r) << 16; NP allow
// L 32767, NP isolation L 16384, baseline rank b L 16383 - b; the low bit is deny
const ADMIN0 = 0x7fff0000;
const ADMIN1 = 0x7ffe0000;
const NP_ALLOW = 0xfffe;
const NP_ISOLATION = 0x8000;
const BASELINE0 = 0x7ffe;

function state(hostIdentity: number): DesiredState {
  const admin: TableEntry[] = [
    e(ID_NODE, 6, 6443, 16, ADMIN0 | 1, 'deny', 1), // a `nodes` peer: deny the API server port
    e(ID_NODE, 6, 10250, 16, ADMIN1, 'pass', 2), // and pass the kubelet's
  ];
  const npLower: TableEntry[] = [
    e(ID.ALL_PODS, 6, 8080, 16, NP_ALLOW, 'allow', 3),
    e(ID.WILDCARD, 0, 0, 0, NP_ISOLATION | 1, 'deny', 4),
  ];
  const baselineLower: TableEntry[] = [e(ID_NODE, 17, 53, 16, BASELINE0 | 1, 'deny', 5)];
  const tables = new Map<string, TableEntry[]>([
    ['admin', admin],
    ['np', npLower],
    ['baseline', baselineLower],
    ['none', []],
  ]);
  const tablesOf = (lower: string) => ({
    ingress: { admin: 'admin', lower },
    egress: { admin: 'admin', lower },
  });
  return {
    ipcache: [
      { prefix: ISOLATED, identity: ID_POD },
      { prefix: OPEN, identity: ID_POD + 1 },
      { prefix: NODE, identity: ID.HOST },
      { prefix: PEER_NODE, identity: ID_NODE },
      { prefix: '0.0.0.0/0', identity: ID.WORLD },
    ],
    endpoints: [
      { ip: ISOLATED, identity: ID_POD, flags: both, tables: tablesOf('np'), ifindex: TEST_RUN_IFINDEX },
      {
        ip: OPEN,
        identity: ID_POD + 1,
        flags: both,
        tables: tablesOf('baseline'),
        ifindex: TEST_RUN_IFINDEX,
      },
    ],
    tables,
    hostIdentity,
  };
}

let sport = 30000;
/** The kernel's verdict for a new flow, and the reference's for the same maps: they must agree. */
async function verdict(
  dp: Datapath,
  dir: 'ingress' | 'egress',
  local: string,
  remote: string,
  proto: number,
  port: number,
) {
  const p =
    dir === 'egress'
      ? { src: local, dst: remote, proto, sport: sport++, dport: port }
      : { src: remote, dst: local, proto, sport: sport++, dport: port };
  const kernel = await kernelVerdict(dp, dir, p);
  const ref = (await referenceOf(dp)).judge(dir, local, remote, proto, port);
  expect(ref.verdict).toBe(kernel);
  return kernel;
}

describe.skipIf(!kernelTestsEnabled())("a pod's own node (HOST) in the kernel", () => {
  let dp: Datapath;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ dp, cleanup } = await freshDatapath());
    await dp.sync(state(ID_NODE));
  });
  afterAll(async () => cleanup?.());

  it('the admin tier judges the own node by its node identity, in both directions', async () => {
    expect(await dp.hostIdentity()).toBe(ID_NODE);
    expect(await verdict(dp, 'egress', ISOLATED, NODE, 6, 6443)).toBe('deny');
    expect(await verdict(dp, 'egress', OPEN, NODE, 6, 6443)).toBe('deny');
    expect(await verdict(dp, 'ingress', OPEN, NODE, 6, 6443)).toBe('deny');
    // the same rule for a remote node with the same labels
    expect(await verdict(dp, 'egress', OPEN, PEER_NODE, 6, 6443)).toBe('deny');
  });

  it('a NetworkPolicy never blocks the own node (its isolation, after an admin Pass too); a remote node it does; the cache keeps them apart', async () => {
    // first the own node, so that a verdict cached under the node identity would answer the remote one
    expect(await verdict(dp, 'egress', ISOLATED, NODE, 6, 80)).toBe('allow');
    expect(await verdict(dp, 'egress', ISOLATED, PEER_NODE, 6, 80)).toBe('deny');
    expect(await verdict(dp, 'egress', ISOLATED, NODE, 6, 80)).toBe('allow');
    // kubelet probes: ingress from the own node to an isolated pod
    expect(await verdict(dp, 'ingress', ISOLATED, NODE, 6, 9999)).toBe('allow');
    expect(await verdict(dp, 'ingress', ISOLATED, PEER_NODE, 6, 9999)).toBe('deny');
    // Pass hands the kubelet port to the lower layer: the NetworkPolicy cannot block it
    expect(await verdict(dp, 'egress', ISOLATED, NODE, 6, 10250)).toBe('allow');
    expect(await verdict(dp, 'egress', ISOLATED, PEER_NODE, 6, 10250)).toBe('deny');
  });

  it('the baseline judges the own node by its node identity; no entry: allowed', async () => {
    expect(await verdict(dp, 'egress', OPEN, NODE, 17, 53)).toBe('deny');
    expect(await verdict(dp, 'egress', OPEN, PEER_NODE, 17, 53)).toBe('deny');
    expect(await verdict(dp, 'egress', OPEN, NODE, 17, 54)).toBe('allow');
    expect(await verdict(dp, 'egress', OPEN, NODE, 6, 10250)).toBe('allow'); // passed, then no entry
  });

  it('host identity 0: the own node is always allowed; changing it drops the cached verdicts; a second sync writes nothing new', async () => {
    expect(await verdict(dp, 'egress', OPEN, NODE, 6, 6443)).toBe('deny'); // cached now
    await dp.sync(state(0));
    expect(await dp.hostIdentity()).toBe(0);
    expect(await verdict(dp, 'egress', OPEN, NODE, 6, 6443)).toBe('allow');
    expect(await verdict(dp, 'egress', OPEN, NODE, 17, 53)).toBe('allow');
    expect(await verdict(dp, 'egress', OPEN, PEER_NODE, 6, 6443)).toBe('deny');
    await dp.sync(state(ID_NODE));
    expect(await verdict(dp, 'egress', OPEN, NODE, 6, 6443)).toBe('deny');
    const again = await dp.sync(state(ID_NODE));
    expect(again.entriesWritten + again.endpointsSwitched + again.ipcacheWritten).toBe(0);
  });
});
