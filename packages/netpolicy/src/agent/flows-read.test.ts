// flows-read: the in-container reader `cascadectl flows --node` runs through pods/exec. Run as a
// process against a stand-in of the agent's /flows (the real endpoint: agent.integration.test.ts; the
// whole path through exec: the real-cluster e2e).
import { execFile, spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentFlowsAddress, agentMetricsBindAddress, flowsReadArgs } from './flows-read.ts';

const SCRIPT = new URL('./flows-read.ts', import.meta.url).pathname;
const read = (...args: string[]) =>
  // asynchronous: the stand-in agent runs in this process
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    execFile(process.execPath, [SCRIPT, ...args], (e, stdout, stderr) =>
      resolve({ code: e ? ((e as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    ),
  );

describe('flows-read', () => {
  it('accepts a plain query and loopback addresses only', () => {
    expect(flowsReadArgs(['verdict=deny&namespace=shop', '--follow'])).toMatchObject({
      query: 'verdict=deny&namespace=shop&follow=1',
      follow: true,
      address: '127.0.0.1:9090',
    });
    expect(flowsReadArgs(['--address', '[::1]:9091'])).toMatchObject({ address: '[::1]:9091', query: '' });
    for (const bad of [
      ['verdict=deny;rm -rf /'],
      ['a'.repeat(600)],
      ['--address', '10.0.0.1:9090'],
      ['--address', 'evil.example:80'],
      ['--address'],
      ['--unknown'],
    ])
      expect(flowsReadArgs(bad)).toHaveProperty('error');
  });

  it("reads on the loopback port the agent listens on, from the agent's own default", () => {
    expect(agentMetricsBindAddress({})).toBe('127.0.0.1:9090');
    expect(agentMetricsBindAddress({ METRICS_PORT: '9191' })).toBe('127.0.0.1:9191');
    // the chart's: every address of the node
    expect(agentMetricsBindAddress({ CASCADE_METRICS_BIND_ADDRESS: ':9090', METRICS_PORT: '9191' })).toBe(
      ':9090',
    );
    expect(agentFlowsAddress({ CASCADE_METRICS_BIND_ADDRESS: ':9292' })).toBe('127.0.0.1:9292');
    expect(agentFlowsAddress({ METRICS_PORT: '9191' })).toBe('127.0.0.1:9191');
  });

  it('bad arguments exit 2 with one line, before any request', () => {
    const r = spawnSync(process.execPath, [SCRIPT, 'x y'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^flows-read: the query is a URL query/);
  });

  describe('against an agent', () => {
    let server: Server;
    let port = 0;
    const seen: string[] = [];
    beforeAll(async () => {
      server = createServer((req, res) => {
        seen.push(req.url ?? '');
        if (req.url?.startsWith('/flows')) {
          res.writeHead(200, { 'content-type': 'application/x-ndjson' });
          res.write('{"from":"sandbox/toy","to":"shop/cart"}\n');
          setTimeout(() => res.end('{"from":"sandbox/toy","to":"shop/web"}\n'), 50);
        } else {
          res.writeHead(404);
          res.end();
        }
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
      port = (server.address() as { port: number }).port;
    });
    afterAll(() => server.close());

    it('copies the stream to standard output with the query and follow flag, and exits 0 when it ends', async () => {
      const r = await read('verdict=deny', '--follow', '--address', `127.0.0.1:${port}`);
      expect(r.code).toBe(0);
      expect(r.stdout.trim().split('\n')).toEqual([
        '{"from":"sandbox/toy","to":"shop/cart"}',
        '{"from":"sandbox/toy","to":"shop/web"}',
      ]);
      expect(seen.at(-1)).toBe('/flows?verdict=deny&follow=1');
    });

    it('an agent that cannot be reached is exit 1 naming the address', async () => {
      const closed = createServer();
      await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
      const gone = (closed.address() as { port: number }).port;
      await new Promise((r) => closed.close(r));
      const r = await read('--address', `127.0.0.1:${gone}`);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`cannot reach the agent at 127.0.0.1:${gone}`);
    });
  });
});
