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
      if ((req.url ?? '').includes('namespace=staged')) {
        // a flow the node's datapath judged by its staged tables too
        res.end(
          `${JSON.stringify({ ...flow(3, 'allow'), rule: 'NetworkPolicy/db/server#ingress[0]', staged: { verdict: 'deny', rule: 'StagedNetworkPolicy/db/server' } })}\n`,
        );
        return;
      }
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

  it("shows the datapath's staged mark as it is, in a STAGED column, without --staged too", async () => {
    const r = await run('flows', '--agent', url, '-n', 'staged');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/VERDICT\s+DECIDED BY\s+STAGED/);
    // the flow the datapath did not mark: "="; the marked one: what the staged set would do, and where
    expect(r.stdout).toMatch(/DENY\s+AdminNetworkPolicy\/db-lockdown#ingress\[0\]\s+=/);
    expect(r.stdout).toMatch(
      /ALLOW\s+NetworkPolicy\/db\/server#ingress\[0\]\s+WOULD DENY \(ingress: StagedNetworkPolicy\/db\/server isolation \(no rule of it allows the flow\); datapath\)/,
    );
    const j = await run('flows', '--agent', url, '-n', 'staged', '-o', 'json');
    const marked = j.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l))
      .find((f) => f.verdict === 'allow');
    expect(marked.staged).toEqual({
      verdict: 'deny',
      changed: true,
      decidedBy: 'ingress: StagedNetworkPolicy/db/server isolation (no rule of it allows the flow); datapath',
    });
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

describe('cascadectl flows --staged', () => {
  const EX = new URL('../../../examples/', import.meta.url).pathname;
  const rec = (from: string, to: string, port: number, verdict: string, protocol = 'TCP') => ({
    time: '2026-11-29T08:00:00.000Z',
    node: 'node-a',
    direction: 'ingress',
    verdict,
    reason: 'policy',
    from,
    to,
    protocol,
    port,
  });
  let server: Server;
  let url = '';
  beforeAll(async () => {
    const flows = [
      rec('monitoring/prometheus', 'payments/ledger', 9090, 'allow'), // its policy staged for deletion
      rec('shop/web', 'sandbox/toy', 443, 'allow'), // sandbox's staged default deny
      rec('shop/web', 'shop/cart', 9000, 'allow'), // nothing staged changes it
      rec('sandbox/toy', 'shop/gone', 80, 'deny'), // a pod that is gone
      rec('shop/web', 'sandbox/toy', 0, 'allow', 'ICMP'),
    ];
    server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.end(flows.map((f) => `${JSON.stringify(f)}\n`).join(''));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(() => server.close());

  it('marks each flow the staged set would change, with the staged rule; the rest =', async () => {
    const r = await run('flows', '--agent', url, '--staged', `${EX}netpol`, `${EX}staged`);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/VERDICT\s+DECIDED BY\s+STAGED/);
    expect(r.stdout).toMatch(
      /monitoring\/prometheus\s+payments\/ledger\s+TCP\/9090\s+ALLOW\s+.*WOULD DENY \(ingress: networkpolicy NetworkPolicy payments\/ledger-from-shop isolation\)/,
    );
    expect(r.stdout).toMatch(
      /shop\/web\s+sandbox\/toy\s+TCP\/443\s+ALLOW\s+.*WOULD DENY \(ingress: networkpolicy StagedNetworkPolicy sandbox\/default-deny isolation\)/,
    );
    expect(r.stdout).toMatch(/shop\/web\s+shop\/cart\s+TCP\/9000\s+ALLOW\s+.*\s=$/m);
    expect(r.stdout).toMatch(
      /shop\/gone.*\? \(not judged: "shop\/gone" is neither an address nor a known pod/,
    );
    expect(r.stdout).toMatch(/ICMP\/0.*\? \(not judged: no policy names ICMP\)/);
    expect(r.stderr).toMatch(/2 of 3 flow\(s\) judged would change under the staged set/);
    // counted by the staged rule that decides
    expect(r.stderr).toMatch(
      /\n {2}1 would deny by ingress: networkpolicy NetworkPolicy payments\/ledger-from-shop isolation\n {2}1 would deny by ingress: networkpolicy StagedNetworkPolicy sandbox\/default-deny isolation/,
    );
  });

  it('-o json carries the staged verdict; without policies --staged is a usage error', async () => {
    const r = await run('flows', '--agent', url, '--staged', `${EX}netpol`, `${EX}staged`, '-o', 'json');
    const lines = r.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l));
    expect(lines[0].staged).toEqual({
      verdict: 'deny',
      changed: true,
      decidedBy: 'ingress: networkpolicy NetworkPolicy payments/ledger-from-shop isolation',
    });
    expect(lines[2].staged).toEqual({ verdict: 'allow', changed: false });
    const bad = await run('flows', '--agent', url, '--staged');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(
      /--staged judges the flows against the policies: give --kubeconfig PATH or FILES/,
    );
    const stray = await run('flows', '--agent', url, `${EX}netpol`);
    expect(stray.stderr).toMatch(/FILES are the policies --staged judges flows against/);
  });
});
