// Token limits through cascadectl: Kuadrant's TokenRateLimitPolicy read as it is (kuadrant.io/v1alpha1),
// and what `request --response-body` says for each response wasm-shim may meet: JSON, a stream, a
// stream cut short, a body without usage, not JSON; the next request's 429; both configuration forms.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { run } from './run.ts';

const EX = resolve(import.meta.dirname, '../../../examples/ai-gateway');
const RESPONSES = resolve(import.meta.dirname, '../../../examples/llm-responses');
const tmp = mkdtempSync(join(tmpdir(), 'cascade-tokens-'));

type Action = { type: string; run: boolean; why?: string; hits?: number; counted?: { max_value: number }[] };
const ask = async (body: string | undefined, ...args: string[]) => {
  const r = await run(
    'request',
    EX,
    '--host',
    'chat.ai.example.com',
    '-X',
    'POST',
    '--path',
    '/v1/chat/completions',
    '--identity',
    '{"userid":"alice","plan":"free"}',
    ...(body ? ['--response-body', body] : []),
    ...args,
    '-o',
    'json',
  );
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as {
    actions: Action[];
    response: { status?: number; why: string; steps: string[] };
  };
};
const report = (o: Awaited<ReturnType<typeof ask>>) => o.actions.find((a) => a.type === 'ratelimit-report')!;

describe('token limits in cascadectl', () => {
  it("reads Kuadrant's kuadrant.io/v1alpha1 TokenRateLimitPolicy unchanged, and names a wrong apiVersion", async () => {
    const kuadrant = String(readFileSync(join(EX, '10-policies.yaml'))).replace(
      /apiVersion: cascade\.dev\/v1alpha1\nkind: TokenRateLimitPolicy/g,
      'apiVersion: kuadrant.io/v1alpha1\nkind: TokenRateLimitPolicy',
    );
    const dir = mkdtempSync(join(tmp, 'k-'));
    writeFileSync(join(dir, '00.yaml'), readFileSync(join(EX, '00-gateway.yaml')));
    writeFileSync(join(dir, '10.yaml'), kuadrant);
    const ours = await run('effective', EX, '--kind', 'TokenRateLimitPolicy', '-o', 'json');
    const theirs = await run('effective', dir, '--kind', 'TokenRateLimitPolicy', '-o', 'json');
    expect(theirs.code, theirs.stderr).toBe(0);
    expect(theirs.stdout).toBe(ours.stdout);
    writeFileSync(join(dir, '10.yaml'), kuadrant.replace(/kuadrant\.io\/v1alpha1/g, 'kuadrant.io/v1'));
    const wrong = await run('effective', dir, '--kind', 'TokenRateLimitPolicy');
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toMatch(
      /TokenRateLimitPolicy daily-tokens\): apiVersion: "kuadrant.io\/v1" is not one of cascade.dev\/v1alpha1, kuadrant.io\/v1alpha1/,
    );
  });

  it('JSON and streamed responses: the tokens reported; over the limit, the next request gets 429', async () => {
    for (const form of ['legacy', 'typed'])
      expect(report(await ask(join(RESPONSES, 'completion.json'), '--config-form', form)).hits).toBe(2300);
    const stream = await ask(join(RESPONSES, 'stream.sse'), '--tokens', '9500');
    expect(report(stream).hits).toBe(814);
    expect(stream.response.status).toBe(200);
    expect(stream.response.steps.join('\n')).toMatch(/holds 10314, so the next request gets 429/);
    // the window at the free plan's 10,000: Limitador's check counts one hit, so 429 before the request
    const over = await ask(undefined, '--tokens', '10000');
    expect(over.response.status).toBe(429);
    expect(over.response.why).toMatch(/already counted 10000 tokens in the window/);
    expect((await ask(undefined, '--tokens', '9999')).response.status).toBe(200);
  });

  it('bad responses count nothing, and say why; the response itself is unchanged', async () => {
    const write = (name: string, text: string) => {
      writeFileSync(join(tmp, name), text);
      return join(tmp, name);
    };
    const cases: [string, RegExp][] = [
      [join(RESPONSES, 'stream-truncated.sse'), /not in event 1 of 2/],
      [write('no-usage.json', '{"id":"x","choices":[]}'), /\/usage\/total_tokens is not in the whole body/],
      [write('html.json', '<html>502 Bad Gateway</html>'), /the body is not JSON/],
      [write('null.json', '{"usage":{"total_tokens":null}}'), /is null, not a scalar/],
      [write('negative.json', '{"usage":{"total_tokens":-5}}'), /not a whole number of hits/],
    ];
    for (const [file, why] of cases)
      for (const form of ['legacy', 'typed']) {
        const o = await ask(file, '--config-form', form);
        expect(report(o).run, `${file} ${form}`).toBe(false);
        expect(o.response.status).toBe(200);
        expect(o.response.steps.join('\n'), `${file} ${form}`).toMatch(/token report: nothing counted/);
        if (form === 'legacy' || !/whole number/.test(String(why)))
          expect(report(o).why, `${file} ${form}`).toMatch(why);
      }
  });

  it('without a response the report is said to run on it; a missing file is a usage error', async () => {
    expect(report(await ask(undefined)).why).toMatch(/runs on the response: no response given/);
    const r = await run(
      'request',
      EX,
      '--host',
      'chat.ai.example.com',
      '--response-body',
      join(tmp, 'nope.json'),
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--response-body .*nope\.json: ENOENT/);
  });
});
