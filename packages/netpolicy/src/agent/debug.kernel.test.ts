// cascade-dbg against a real pinned datapath: what it prints is what the kernel maps hold (the
// endpoints and Services an agent synced, the conntrack entry a packet made, the counters it moved),
// read by another process without loading, re-pinning or writing anything.
import { execFileSync } from 'node:child_process';
import { createServer } from 'node:http';
import { join, resolve } from 'node:path';
import { buildPacket, EP_FLAGS, ID, TEST_RUN_IFINDEX } from '@cascade/bpf-datapath';
import { entry, freshDatapath, kernelTestsEnabled, TABLES_OF } from '@cascade/bpf-datapath/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { debugCommand } from './debug.ts';
import { serveRules } from './flows.ts';

const ROOT = resolve(import.meta.dirname, '../../../..');

describe.skipIf(!kernelTestsEnabled())('cascade-dbg reads the live datapath', () => {
  let fresh: Awaited<ReturnType<typeof freshDatapath>>;
  beforeAll(async () => {
    fresh = await freshDatapath();
    await fresh.dp.sync({
      ipcache: [
        { prefix: '10.0.0.1', identity: 300 },
        { prefix: '10.0.0.2', identity: 301 },
        { prefix: '0.0.0.0/0', identity: ID.WORLD },
      ],
      endpoints: [
        {
          ip: '10.0.0.1',
          identity: 300,
          flags: EP_FLAGS.ENFORCE_EGRESS,
          tables: TABLES_OF,
          ifindex: TEST_RUN_IFINDEX,
        },
      ],
      tables: new Map([
        ['in-admin', []],
        ['in-lower', []],
        ['out-admin', []],
        [
          'out-lower',
          [entry(301, 6, 8080, 16, 0xfffe, 'allow', 1), entry(ID.WILDCARD, 0, 0, 0, 0x8001, 'deny', 9)],
        ],
      ]),
      services: [{ addr: '10.96.0.10', port: 80, proto: 6, backends: [{ addr: '10.0.0.2', port: 8080 }] }],
    });
    // one allowed flow through the real program: a conntrack entry and an allow counted
    const r = await fresh.dp.run(
      'from_endpoint',
      buildPacket({ src: '10.0.0.1', dst: '10.0.0.2', proto: 6, sport: 40000, dport: 8080, tcpFlags: 2 }),
    );
    expect(r.retval).toBe(0);
  });
  afterAll(async () => fresh?.cleanup());

  const dbg = async (...args: string[]) => {
    const r = await debugCommand(['--pin-dir', fresh.pinDir, ...args]);
    expect(r.code, r.out).toBe(0);
    return JSON.parse(r.out);
  };

  it('endpoints, hosts, Services and conntrack as the kernel holds them', async () => {
    expect(await dbg('endpoints')).toMatchObject([
      { address: '10.0.0.1', identity: 300, ifindex: TEST_RUN_IFINDEX },
    ]);
    expect((await dbg('hosts')).map((h: { address: string }) => h.address)).toEqual(['10.0.0.1', '10.0.0.2']);
    expect(await dbg('services')).toEqual([
      { frontend: '10.96.0.10:80', proto: 6, backends: ['10.0.0.2:8080'] },
    ]);
    const ct = await dbg('ct');
    expect(ct.total).toBe(1);
    expect(ct.entries[0]).toMatchObject({
      local: '10.0.0.1',
      remote: '10.0.0.2',
      lport: 40000,
      rport: 8080,
      verdict: 'allow',
    });
    const summary = await dbg('summary');
    expect(summary).toMatchObject({ endpoints: 1, hosts: 2, services: 1, conntrackEntries: 1 });
    expect(summary.policyEntries).toBeGreaterThan(0);
    expect(summary.counters.allow).toBeGreaterThanOrEqual(1);
    const state = await dbg('state');
    expect(state.endpoints).toHaveLength(1);
    expect(state.hosts).toHaveLength(2);
    expect(state.services).toHaveLength(1);
  });

  it("writes nothing: the agent's datapath is the same before and after", async () => {
    const before = await fresh.dp.counters();
    await dbg('summary');
    await dbg('ct', '5');
    expect(await fresh.dp.counters()).toEqual(before);
    expect((await dbg('endpoints')).length).toBe(1);
  });

  it('as the image runs it: a process of its own; bad input is one line and exit 2', () => {
    const out = execFileSync(
      join(ROOT, 'node_modules/.bin/node'),
      [join(ROOT, 'packages/netpolicy/src/agent/debug.ts'), '--pin-dir', fresh.pinDir, 'counters'],
      {
        encoding: 'utf8',
      },
    );
    expect(JSON.parse(out)).toHaveProperty('unboundSource');
  });

  it('refuses what it does not know, and says what is missing', async () => {
    expect((await debugCommand(['frob'])).code).toBe(2);
    expect((await debugCommand(['ct', '-1'])).code).toBe(2);
    const gone = await debugCommand(['--pin-dir', '/sys/fs/bpf/cascade-nothing-here', 'summary']);
    expect(gone.code).toBe(1);
    expect(gone.out).toMatch(/^cannot open the datapath pinned under \/sys\/fs\/bpf\/cascade-nothing-here: /);
    expect((await debugCommand(['--pin-dir', 'relative/../x', 'summary'])).out).toMatch(/bad pin directory/);
  });

  it('trace: a synthetic packet through the real program on the live maps, the deciding rule named, nothing left behind', async () => {
    const server = createServer((req, res) => {
      if (!serveRules(req, res, new Map([[1, 'NetworkPolicy/app/web#egress[0]']]))) res.end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    const env = { CASCADE_PIN_DIR: fresh.pinDir, CASCADE_METRICS_BIND_ADDRESS: `127.0.0.1:${port}` };
    try {
      const before = (await dbg('ct')).total;
      const ok = await debugCommand(['trace', '10.0.0.1', '10.0.0.2', 'tcp', '8080'], env);
      expect(ok.code, ok.out).toBe(0);
      expect(JSON.parse(ok.out)).toMatchObject({
        verdict: 'allow',
        hops: [
          {
            direction: 'egress',
            kernel: 'allow',
            decided: 'lower',
            rule: 'NetworkPolicy/app/web#egress[0] (#1)',
          },
        ],
        note: '10.0.0.2 is not a pod of this node: its side is judged on its own node',
      });
      const denied = JSON.parse(
        (await debugCommand(['trace', '10.0.0.1', '10.0.0.2', 'udp', '9090'], env)).out,
      );
      expect(denied).toMatchObject({
        verdict: 'deny',
        hops: [{ kernel: 'deny', reference: 'deny', decided: 'lower', rule: '#9' }],
      });
      // the trace's conntrack entry is gone: the datapath holds what it held
      expect((await dbg('ct')).total).toBe(before);
      const svc = await debugCommand(['trace', '10.0.0.1', '10.96.0.10', 'tcp', '80'], env);
      expect(svc.code).toBe(1);
      expect(svc.out).toMatch(/is a Service frontend: trace one of its backends/);
      const nobody = await debugCommand(['trace', '10.5.0.1', '10.5.0.2', 'tcp', '80'], env);
      expect(nobody.out).toMatch(/neither 10\.5\.0\.1 nor 10\.5\.0\.2 is an endpoint of this node/);
      expect((await debugCommand(['trace', '10.0.0.1', 'x', 'tcp', '80'], env)).code).toBe(2);
      expect((await debugCommand(['trace', '10.0.0.1', '10.0.0.2', 'sctp', '80'], env)).out).toMatch(
        /not tcp or udp/,
      );
    } finally {
      server.close();
    }
  });
});
