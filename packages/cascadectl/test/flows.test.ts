// cascadectl flows against an agent's /flows endpoint (here a stand-in HTTP server speaking the same
// NDJSON; the real agent's endpoint is tested in @cascade/netpolicy's agent integration test).
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decidedBy } from '../src/commands/flows.ts';
import { run } from './run.ts';

const flow = (i: number, verdict: string) => ({
  time: `2026-11-23T10:00:0${i}.000Z`,
  node: 'n1',
  direction: 'ingress',
  verdict,
  reason: 'policy',
  from: 'app/client',
  to: 'db/server',
  fromNamespace: 'app',
  toNamespace: 'db',
  protocol: 'TCP',
  port: 5432,
  rule: 'AdminNetworkPolicy/db-lockdown#ingress[0]',
});

describe('cascadectl flows', () => {
  let server: Server;
  let url = '';
  const seen: string[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(req.url ?? '');
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.write(`${JSON.stringify(flow(1, 'deny'))}\n`);
      if ((req.url ?? '').includes('follow=1')) {
        setTimeout(() => res.end(`${JSON.stringify(flow(2, 'deny'))}\n`), 100);
      } else res.end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(() => server.close());

  it('prints time, node, from, to, protocol/port, verdict and the deciding rule; filters go to the agent', async () => {
    const r = await run('flows', '--agent', url, '--verdict', 'deny', '-n', 'db');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/TIME\s+NODE\s+DIRECTION\s+FROM\s+TO\s+PROTO\/PORT\s+VERDICT\s+DECIDED BY/);
    expect(r.stdout).toMatch(
      /n1\s+ingress\s+app\/client\s+db\/server\s+TCP\/5432\s+DENY\s+AdminNetworkPolicy\/db-lockdown#ingress\[0\]/,
    );
    expect(seen.at(-1)).toBe('/flows?verdict=deny&namespace=db');
  });

  it('--follow streams until the agent closes; -o json prints one object per line', async () => {
    const r = await run('flows', '--agent', url, '--follow', '-o', 'json');
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n').filter((l) => l.startsWith('{'));
    expect(lines.map((l) => JSON.parse(l).time)).toEqual([
      '2026-11-23T10:00:01.000Z',
      '2026-11-23T10:00:02.000Z',
    ]);
  });

  it('a denial with no rule says why: isolation (default deny), fail closed, or rejudged; with its direction', () => {
    const base = { verdict: 'deny', direction: 'egress' };
    expect(decidedBy({ ...base, reason: 'policy' })).toBe(
      'no rule allows it: the pod is isolated for egress (default deny)',
    );
    expect(decidedBy({ ...base, reason: 'fail-closed' })).toMatch(/^fail closed/);
    expect(decidedBy({ ...base, reason: 'rejudged' })).toBe('rejudged after a policy change');
    expect(decidedBy({ ...base, rule: 'NetworkPolicy/shop/x#egress[0]' })).toBe(
      'NetworkPolicy/shop/x#egress[0]',
    );
  });

  it('without --agent or --node it says what to give', async () => {
    const r = await run('flows');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/give --agent URL, or --node N/);
  });
});
