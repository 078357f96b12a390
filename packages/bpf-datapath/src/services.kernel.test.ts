// Services through the real program (BPF_PROG_TEST_RUN): a pod's flow to a ClusterIP or NodePort is
// translated at its interface, judged against the backend, tracked, and its replies get the frontend
// back; checksums stay right; backends that leave take their flows' translation with them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARTIFACTS } from './artifacts.ts';
import { addr16, COUNTERS, EP_FLAGS, ID, TEST_RUN_IFINDEX } from './codecs.ts';
import { Datapath } from './loader.ts';
import { buildPacket, checksumsValid, type PacketSpec, TCP_FLAGS, withChecksums } from './packet.ts';
import { type DesiredService, NODEPORT_ADDR } from './services.ts';
import { type DesiredState, encodeState } from './state.ts';
import {
  entry as e,
  freshDatapath,
  kernelTestsEnabled,
  referenceOf,
  TABLES_OF,
  TC_ACT_OK,
  TC_ACT_SHOT,
} from './testing.ts';

const A = '10.0.0.1'; // the client pod (egress enforced)
const B = '10.0.0.2'; // an allowed backend (tcp/8080, udp/53)
const C = '10.0.0.3'; // a denied backend
const OTHER_NODE_POD = '10.1.0.7'; // a backend on another node: allowed by its identity
const NODE = '192.0.2.2';
const VIP = '10.96.0.10';
const A6 = 'fd00::a';
const B6 = 'fd00::2';
const VIP6 = 'fd00:96::10';
const ID_B = 301;
const ID_C = 302;
const ID_REMOTE = 303;

const svc = (addr: string, port: number, proto: number, ...backends: [string, number][]): DesiredService => ({
  addr,
  port,
  proto,
  backends: backends.map(([a, p]) => ({ addr: a, port: p })),
});

function state(services: DesiredService[]): DesiredState {
  return {
    ipcache: [
      { prefix: A, identity: 300 },
      { prefix: B, identity: ID_B },
      { prefix: C, identity: ID_C },
      { prefix: B6, identity: ID_B },
      { prefix: OTHER_NODE_POD, identity: ID_REMOTE },
      { prefix: NODE, identity: ID.HOST },
      { prefix: '0.0.0.0/0', identity: ID.WORLD },
    ],
    endpoints: [
      { ip: A, identity: 300, flags: EP_FLAGS.ENFORCE_EGRESS, tables: TABLES_OF, ifindex: TEST_RUN_IFINDEX },
      { ip: A6, identity: 300, flags: EP_FLAGS.ENFORCE_EGRESS, tables: TABLES_OF, ifindex: TEST_RUN_IFINDEX },
    ],
    tables: new Map([
      ['in-admin', []],
      ['in-lower', []],
      ['out-admin', []],
      [
        'out-lower',
        [
          e(ID_B, 6, 8080, 16, 0xfffe, 'allow', 1),
          e(ID_B, 17, 53, 16, 0xfffe, 'allow', 2),
          e(ID_REMOTE, 6, 8080, 16, 0xfffe, 'allow', 3),
          e(ID.WILDCARD, 0, 0, 0, 0x8001, 'deny', 9),
        ],
      ],
    ]),
    services,
  };
}

const SERVICES = [
  svc(VIP, 80, 6, [B, 8080]),
  svc(VIP, 53, 17, [B, 53]),
  svc('10.96.0.11', 80, 6, [C, 8080]),
  svc('10.96.0.12', 80, 6, [A, 8080]), // A is its only backend
  svc('10.96.0.13', 80, 6, [A, 8080], [B, 8080]), // A and another backend
  svc('10.96.0.14', 80, 6, [OTHER_NODE_POD, 8080]),
  svc('10.96.0.15', 80, 6), // no ready backend
  svc(NODEPORT_ADDR[4], 30080, 6, [B, 8080]), // a NodePort
  svc(VIP6, 80, 6, [B6, 8080]),
];

const tcp = (
  src: string,
  dst: string,
  sport: number,
  dport: number,
  flags: number = TCP_FLAGS.SYN,
): PacketSpec => ({
  src,
  dst,
  proto: 6,
  sport,
  dport,
  tcpFlags: flags,
});

/** The frame's destination (or source) address and port after the program. */
function endpointOf(frame: Buffer, which: 'src' | 'dst'): string {
  const v4 = frame.readUInt16BE(12) === 0x0800;
  const l4 = v4 ? 14 + (frame[14]! & 15) * 4 : 54;
  const port = frame.readUInt16BE(l4 + (which === 'src' ? 0 : 2));
  if (v4) {
    const o = 14 + (which === 'src' ? 12 : 16);
    return `${[...frame.subarray(o, o + 4)].join('.')}:${port}`;
  }
  const o = 14 + (which === 'src' ? 8 : 24);
  return `${frame.subarray(o, o + 16).toString('hex')}:${port}`;
}
const v6hex = (a: string) => addr16(a).toString('hex');

describe.skipIf(!kernelTestsEnabled())('Services in the kernel datapath', () => {
  let dp: Datapath;
  let pinDir: string;
  let cleanup: () => Promise<void>;
  const run = (prog: 'from_endpoint' | 'to_endpoint', p: PacketSpec) =>
    dp.run(prog, withChecksums(buildPacket(p)));

  beforeAll(async () => {
    ({ dp, pinDir, cleanup } = await freshDatapath());
    const r = await dp.sync(state(SERVICES));
    expect(r.services).toMatchObject({ frontendsWritten: SERVICES.length, backendsWritten: 9 });
  });
  afterAll(async () => cleanup?.());

  it('writes exactly what encodeState computes offline', async () => {
    const offline = encodeState(state(SERVICES));
    const dump = async (m: string) =>
      (await dp.ctl.send(`dump ${m}`, [], 'count'))
        .slice(1)
        .map((l) => l)
        .sort();
    const enc = (pairs: [Buffer, Buffer][]) =>
      pairs.map(([k, v]) => `${k.toString('hex')} ${v.toString('hex')}`).sort();
    expect(await dump('cascade_services')).toEqual(enc(offline.services));
    expect(await dump('cascade_backends')).toEqual(enc(offline.backends));
  });

  it('a ClusterIP flow goes to its backend, judged as the backend, checksums right, both ways', async () => {
    const syn = await run('from_endpoint', tcp(A, VIP, 40000, 80));
    expect(syn.retval).toBe(TC_ACT_OK);
    expect(endpointOf(syn.out, 'dst')).toBe(`${B}:8080`);
    expect(checksumsValid(syn.out)).toBe(true);
    // later packets of the flow: the same backend (conntrack by backend, translation remembered)
    const ack = await run('from_endpoint', tcp(A, VIP, 40000, 80, TCP_FLAGS.ACK));
    expect([ack.retval, endpointOf(ack.out, 'dst')]).toEqual([TC_ACT_OK, `${B}:8080`]);
    // the reply from the backend gets the frontend back as its source
    const reply = await run('to_endpoint', tcp(B, A, 8080, 40000, TCP_FLAGS.SYN | TCP_FLAGS.ACK));
    expect(reply.retval).toBe(TC_ACT_OK);
    expect(endpointOf(reply.out, 'src')).toBe(`${VIP}:80`);
    expect(checksumsValid(reply.out)).toBe(true);
    // the same backend reached directly (not through the Service) is a flow of its own: no rewrite
    const direct = await run('to_endpoint', tcp(B, A, 8080, 40001, TCP_FLAGS.ACK));
    expect(direct.retval).toBe(TC_ACT_OK); // ingress is not enforced for A
    expect(endpointOf(direct.out, 'src')).toBe(`${B}:8080`);
  });

  it('a Service whose backend the policy denies is denied (not judged as the ClusterIP)', async () => {
    const r = await run('from_endpoint', tcp(A, '10.96.0.11', 40002, 80));
    expect(r.retval).toBe(TC_ACT_SHOT);
    const [ev] = (await dp.events()).filter((x) => x.dport === 8080 && x.dst === C);
    expect(ev).toMatchObject({ verdict: 'deny', rule: 9, remoteIdentity: ID_C });
  });

  it('DNS over UDP to the kube-dns ClusterIP: translated, allowed, the zero UDP checksum stays zero', async () => {
    const q = await run('from_endpoint', { src: A, dst: VIP, proto: 17, sport: 5353, dport: 53 });
    expect([q.retval, endpointOf(q.out, 'dst')]).toEqual([TC_ACT_OK, `${B}:53`]);
    expect(checksumsValid(q.out)).toBe(true);
    const raw = await dp.run(
      'from_endpoint',
      buildPacket({ src: A, dst: VIP, proto: 17, sport: 5354, dport: 53 }),
    );
    expect(raw.retval).toBe(TC_ACT_OK);
    expect(raw.out.readUInt16BE(14 + 20 + 6)).toBe(0);
    const answer = await run('to_endpoint', { src: B, dst: A, proto: 17, sport: 53, dport: 5353 });
    expect([answer.retval, endpointOf(answer.out, 'src')]).toEqual([TC_ACT_OK, `${VIP}:53`]);
    // TCP 53 has no frontend here: untranslated, judged as the ClusterIP (world): denied
    expect((await run('from_endpoint', tcp(A, VIP, 40003, 53))).retval).toBe(TC_ACT_SHOT);
  });

  it('a NodePort on the node address is translated; a backend on another node is judged by its identity', async () => {
    const np = await run('from_endpoint', tcp(A, NODE, 40004, 30080));
    expect([np.retval, endpointOf(np.out, 'dst')]).toEqual([TC_ACT_OK, `${B}:8080`]);
    const remote = await run('from_endpoint', tcp(A, '10.96.0.14', 40005, 80));
    expect([remote.retval, endpointOf(remote.out, 'dst')]).toEqual([TC_ACT_OK, `${OTHER_NODE_POD}:8080`]);
    // a port of the node that is no NodePort: the node itself (always allowed), untranslated
    const host = await run('from_endpoint', tcp(A, NODE, 40006, 22));
    expect([host.retval, endpointOf(host.out, 'dst')]).toEqual([TC_ACT_OK, `${NODE}:22`]);
  });

  it('hairpin: the pod is skipped when the Service has another backend, allowed untranslated when alone', async () => {
    for (let port = 41000; port < 41020; port++) {
      const r = await run('from_endpoint', tcp(A, '10.96.0.13', port, 80));
      expect([r.retval, endpointOf(r.out, 'dst')]).toEqual([TC_ACT_OK, `${B}:8080`]);
    }
    const self = await run('from_endpoint', tcp(A, '10.96.0.12', 40007, 80));
    expect([self.retval, endpointOf(self.out, 'dst')]).toEqual([TC_ACT_OK, '10.96.0.12:80']);
    // no ready backend: untranslated (kube-proxy rejects), judged as the address: denied here
    expect((await run('from_endpoint', tcp(A, '10.96.0.15', 40008, 80))).retval).toBe(TC_ACT_SHOT);
  });

  it('IPv6 Services are translated with the TCP checksum right', async () => {
    const r = await run('from_endpoint', tcp(A6, VIP6, 40009, 80));
    expect([r.retval, endpointOf(r.out, 'dst')]).toEqual([TC_ACT_OK, `${v6hex(B6)}:8080`]);
    expect(checksumsValid(r.out)).toBe(true);
    const reply = await run('to_endpoint', tcp(B6, A6, 8080, 40009, TCP_FLAGS.ACK));
    expect(endpointOf(reply.out, 'src')).toBe(`${v6hex(VIP6)}:80`);
    expect(checksumsValid(reply.out)).toBe(true);
  });

  it('the reference datapath models the same targets', async () => {
    const ref = await referenceOf(dp);
    expect(ref.serviceTarget(A, VIP, 6, 80)).toEqual({
      kind: 'backends',
      backends: [{ addr: B, port: 8080 }],
    });
    expect(ref.serviceTarget(A, NODE, 6, 30080)).toMatchObject({ kind: 'backends' });
    expect(ref.serviceTarget(A, '10.96.0.12', 6, 80)).toEqual({ kind: 'self' });
    expect(ref.serviceTarget(A, '10.96.0.13', 6, 80)).toEqual({
      kind: 'backends',
      backends: [{ addr: B, port: 8080 }],
    });
    expect(ref.serviceTarget(A, '10.96.0.15', 6, 80)).toEqual({ kind: 'none' });
    expect(ref.serviceTarget(A, NODE, 6, 22)).toEqual({ kind: 'none' });
  });

  it('a backend that leaves takes its flows with it: their next packet goes to a live backend, judged afresh', async () => {
    const open = await run('from_endpoint', tcp(A, VIP, 42000, 80));
    expect(endpointOf(open.out, 'dst')).toBe(`${B}:8080`);
    const before = await dp.counter(COUNTERS.svcNew);
    // B leaves the Service, C (denied) is its only backend now
    const r = await dp.sync(state([svc(VIP, 80, 6, [C, 8080]), ...SERVICES.slice(1)]));
    expect(r.services).toMatchObject({ frontendsWritten: 1, frontendsDeleted: 0 });
    expect(r.services!.natForgotten).toBeGreaterThanOrEqual(1);
    const next = await run('from_endpoint', tcp(A, VIP, 42000, 80, TCP_FLAGS.ACK));
    expect(next.retval).toBe(TC_ACT_SHOT);
    expect(await dp.counter(COUNTERS.svcNew)).toBe(before + 1);
    // an unchanged sync writes nothing
    const again = await dp.sync(state([svc(VIP, 80, 6, [C, 8080]), ...SERVICES.slice(1)]));
    expect(again.services).toMatchObject({ frontendsWritten: 0, frontendsDeleted: 0, backendsWritten: 0 });
    // the Service deleted: untranslated from then on
    await dp.sync(state(SERVICES.slice(1)));
    const gone = await run('from_endpoint', tcp(A, VIP, 42001, 80));
    expect(endpointOf(gone.out, 'dst')).toBe(`${VIP}:80`);
  });

  it('spoofed or denied flows to a Service leave no NAT or conntrack state (round-two review)', async () => {
    await dp.sync(state(SERVICES));
    await dp.clearConntrack();
    const nat = () => (dp as unknown as { dump(m: string): Promise<unknown[]> }).dump('cascade_nat');
    const natBefore = (await nat()).length;
    // 200 SYNs from A's interface naming another address as their source: before, each left a NAT
    // entry in the victim's name in the node-wide LRU before the source was checked
    const unbound = await dp.counter(COUNTERS.unboundSource);
    for (let i = 0; i < 200; i++)
      expect((await run('from_endpoint', tcp('10.0.0.99', VIP, 30000 + i, 80))).retval).toBe(TC_ACT_SHOT);
    expect(await dp.counter(COUNTERS.unboundSource)).toBe(unbound + 200);
    // 50 flows of A to a Service whose backend its policy denies
    for (let i = 0; i < 50; i++)
      expect((await run('from_endpoint', tcp(A, '10.96.0.11', 31000 + i, 80))).retval).toBe(TC_ACT_SHOT);
    expect((await nat()).length).toBe(natBefore);
    expect((await dp.collectConntrack()).scanned).toBe(0);
    // an allowed one makes its NAT and conntrack entries, as before
    expect((await run('from_endpoint', tcp(A, VIP, 32000, 80))).retval).toBe(TC_ACT_OK);
    expect((await nat()).length).toBe(natBefore + 1);
    await dp.sync(state(SERVICES.slice(1))); // as the test before left it
  });

  it('a restarted loader adopts the Service maps: zero writes', async () => {
    const again = await Datapath.open({ bpfctl: ARTIFACTS.bpfctl, object: ARTIFACTS.object, pinDir });
    const r = await again.sync(state(SERVICES.slice(1)));
    await again.close();
    expect(r.services).toMatchObject({ frontendsWritten: 0, frontendsDeleted: 0, backendsWritten: 0 });
  });
});
