// cascadectl request finishes the sentence: what the client gets (200, 401, 403 assumed, 404, 429,
// 500) and why, in wasm-shim's order, on the example gateway and from plain traces.
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { requestOutcome } from '../src/commands/request-outcome.ts';
import { run } from './run.ts';

const EX = resolve(import.meta.dirname, '../../../examples/gateway');
const ask = async (...args: string[]) => {
  const r = await run('request', EX, '--host', 'orders.apps.example.com', ...args, '-o', 'json');
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as {
    response: { status?: number; why: string; assumes?: string; decidedAt?: number };
  };
};

describe('cascadectl request: the response', () => {
  it('without a credential: 401 from the AuthConfig, and the rate limit is not reached (no evaluation error shown)', async () => {
    expect((await ask('--path', '/orders', '-X', 'POST')).response).toMatchObject({
      status: 401,
      why: expect.stringMatching(/authenticates with apiKey and the request carries no credential/),
      decidedAt: 0,
    });
    const text = await run(
      'request',
      EX,
      '--host',
      'orders.apps.example.com',
      '--path',
      '/orders',
      '-X',
      'POST',
    );
    expect(text.stdout).toMatch(
      /2\. ratelimit-service \(ratelimit\), scope team-b\/orders: not reached \(action 1 answered the request\)/,
    );
    expect(text.stdout).toMatch(/^the client gets: 401 Unauthorized: /m);
    expect(text.stdout).not.toContain('<error');
  });

  it('authenticated: 200, saying what is assumed and when 429 comes; past the limit: 429', async () => {
    const ok = await ask('--path', '/orders', '-X', 'POST', '--identity', '{"userid":"alice"}');
    expect(ok.response.status).toBe(200);
    expect(ok.response.assumes).toContain(
      'authorization authorization.deny-anonymous allows (else 403 Forbidden)',
    );
    const over = await ask(
      '--path',
      '/orders',
      '-X',
      'POST',
      '--identity',
      '{"userid":"alice"}',
      '--hits',
      '100',
    );
    expect(over.response).toMatchObject({
      status: 429,
      why: expect.stringContaining('100 per 60 s in team-b/orders'),
    });
  });

  it("a counter that does not evaluate fails the action: the rate-limit service's failure mode decides (allow here)", async () => {
    const r = await ask('--path', '/orders', '-X', 'POST', '--identity', '{"sub":"no-userid"}');
    expect(r.response.status).toBe(200);
    const text = await run(
      'request',
      EX,
      '--host',
      'orders.apps.example.com',
      '--path',
      '/orders',
      '-X',
      'POST',
      '--identity',
      '{"sub":"no-userid"}',
    );
    expect(text.stdout).toMatch(
      /auth\.identity\.userid does not evaluate .*failure mode allow skips it \(not limited\)/,
    );
  });

  it('no route at the proxy: 404', async () => {
    const r = await run(
      'request',
      EX,
      '--gateway',
      'infra/main',
      '--host',
      'nothing.example.org',
      '-o',
      'json',
    );
    expect(r.code, r.stderr).toBe(0);
    expect((JSON.parse(r.stdout) as { response: { status: number } }).response.status).toBe(404);
  });

  it('from plain traces: deny mode answers 500, a missing AuthConfig 404, an anonymous method needs no credential', () => {
    const base = { routed: true, matched: true, identity: false, hits: 0, authMethods: () => ['anonymous'] };
    const broken = {
      type: 'ratelimit',
      service: 'rl',
      run: true,
      blocks: [{ holds: true, entries: [{ key: 'k', error: 'Unknown variable: auth' }] }],
    };
    expect(requestOutcome({ ...base, failureModes: { rl: 'deny' }, actions: [broken] })).toMatchObject({
      status: 500,
      decidedAt: 0,
    });
    const auth = { type: 'auth', service: 'a', run: true, auth: { evaluators: [] } };
    expect(requestOutcome({ ...base, failureModes: {}, actions: [auth] }).status).toBe(404);
    const anon = { ...auth, auth: { authConfig: 'ns/ac', evaluators: [] } };
    expect(requestOutcome({ ...base, failureModes: {}, actions: [anon] }).status).toBe(200);
    expect(requestOutcome({ ...base, matched: false, failureModes: {}, actions: [] }).status).toBeUndefined();
  });
});
