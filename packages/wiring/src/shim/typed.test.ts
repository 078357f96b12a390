// The typed form: its size measured as published, the flag that chooses it, and what wasm-shim reads
// of a response body for token counts (body.ts).
import { describe, expect, it } from 'vitest';
import { WIRING_FLAGS, wiringFlags } from '../controller/flags.ts';
import { bodyFields, sseEvents } from './body.ts';
import { traceRequest } from './request.ts';
import { publishedConfig, toTypedConfig } from './typed.ts';
import { traceTypedRequest } from './typed-request.ts';
import {
  buildWasmConfig,
  DEFAULT_WIRING,
  RATELIMIT_CHECK_SERVICE,
  RATELIMIT_REPORT_SERVICE,
  type WiringPath,
} from './wasm.ts';

const defaults = Object.fromEntries(Object.entries(WIRING_FLAGS).map(([k, v]) => [k, v.default]));

const path = (actions: WiringPath['actions']): WiringPath => ({
  path: {
    gateway: { namespace: 'gw', name: 'gw' },
    listener: 'http',
    route: { kind: 'HTTPRoute', namespace: 'team', name: 'chat' },
    rule: 'rule-1',
  } as WiringPath['path'],
  hostnames: ['ai.example.com'],
  route: undefined,
  actions,
});

/** A token limit as the TokenRateLimitPolicy renders it: a check (hits 0) and a report (the tokens). */
const tokenActions = (counter: string): WiringPath['actions'] =>
  (
    [
      [RATELIMIT_CHECK_SERVICE, '0'],
      [RATELIMIT_REPORT_SERVICE, 'responseBodyJSON("/usage/total_tokens")'],
    ] as const
  ).map(([service, hits]) => ({
    phase: 100,
    action: {
      service,
      scope: 'team/chat',
      conditionalData: [
        {
          data: [
            { expression: { key: 'tokenlimit.per_user__1', value: '1' } },
            { expression: { key: counter, value: counter } },
            { expression: { key: 'ratelimit.hits_addend', value: hits } },
          ],
        },
      ],
    },
  }));

describe('the typed wasm-shim configuration', () => {
  it('measures sizes in the form published, and publishes that form', () => {
    const paths = [path(tokenActions("request.headers['x-user']"))];
    for (const configForm of ['legacy', 'typed'] as const) {
      const settings = { ...DEFAULT_WIRING, configForm };
      const w = buildWasmConfig(paths, settings);
      expect(w.bytes).toBe(Buffer.byteLength(JSON.stringify(publishedConfig(w.config, settings))));
    }
    const legacy = buildWasmConfig(paths, DEFAULT_WIRING);
    // the legacy form names the token services only when they are used
    expect(Object.keys(legacy.config.services).sort()).toEqual([
      'auth-service',
      RATELIMIT_CHECK_SERVICE,
      RATELIMIT_REPORT_SERVICE,
      'ratelimit-service',
    ]);
    expect(Object.keys(buildWasmConfig([path([])], DEFAULT_WIRING).config.services)).toHaveLength(2);
  });

  it('--config-form chooses the form and the wasm-shim image it needs', () => {
    const typed = wiringFlags({ ...defaults, 'config-form': 'typed' });
    expect('error' in typed).toBe(false);
    if ('error' in typed) return;
    expect(typed.wiring.configForm).toBe('typed');
    expect(typed.providers.wasmShimImage).toBe('quay.io/kuadrant/wasm-shim:v0.14.1');
    const legacy = wiringFlags(defaults);
    expect('error' in legacy ? '' : legacy.providers.wasmShimImage).toBe(
      'quay.io/kuadrant/wasm-shim:v0.12.4',
    );
    const pinned = wiringFlags({ ...defaults, 'config-form': 'typed', 'wasm-shim-image': 'my/shim:1' });
    expect('error' in pinned ? '' : pinned.providers.wasmShimImage).toBe('my/shim:1');
    expect(wiringFlags({ ...defaults, 'config-form': 'json' })).toEqual({
      error: '--config-form: "json" is not legacy or typed',
    });
  });

  it('a token limit: checked with 0 hits before, reported with the tokens after, in both forms alike', () => {
    const w = buildWasmConfig([path(tokenActions("request.headers['x-user']"))], DEFAULT_WIRING);
    const typed = toTypedConfig(w.config, DEFAULT_WIRING);
    const set = typed.actionSets[0]!;
    // one store of the body fields first, not a guard; the report is not a guard either
    expect(set.actions.map((a) => [a.type, a.isGuard])).toEqual([
      ['store', false],
      ['grpc', true],
      ['grpc', false],
    ]);
    expect(set.actions[0]).toMatchObject({
      path: 'kuadrant.internal.response.body',
      value: '{"total_tokens": responseBodyJSON("/usage/total_tokens")}',
    });
    const req = {
      host: 'ai.example.com',
      method: 'POST',
      path: '/v1/chat/completions',
      headers: { 'x-user': 'alice' },
      response: { body: '{"usage": {"total_tokens": 321}}', contentType: 'application/json' },
    };
    for (const t of [traceRequest(w.config, req), traceTypedRequest(typed, req)]) {
      expect(t.actions.map((a) => [a.type, a.phase, a.run, a.hits, a.descriptor])).toEqual([
        [
          'ratelimit-check',
          'request',
          true,
          0,
          { 'tokenlimit.per_user__1': '1', "request.headers['x-user']": 'alice' },
        ],
        [
          'ratelimit-report',
          'response',
          true,
          321,
          { 'tokenlimit.per_user__1': '1', "request.headers['x-user']": 'alice' },
        ],
      ]);
    }
    // no usage in the body: the report cannot be built, nothing is counted (both forms)
    const bare = { ...req, response: { body: '{"id": "x"}' } };
    for (const t of [traceRequest(w.config, bare), traceTypedRequest(typed, bare)]) {
      expect(t.actions[0]!.run).toBe(true);
      expect(t.actions[1]!.run).toBe(false);
    }
    // no response given: the report is said to run on the response
    expect(traceRequest(w.config, { ...req, response: undefined }).actions[1]!.why).toMatch(
      /runs on the response/,
    );
  });
});

describe('what wasm-shim reads of a response body (its token-usage task)', () => {
  const sse = (events: string[]) => events.map((e) => `data: ${e}\n\n`).join('');
  const usage = '{"choices":[],"usage":{"total_tokens":42}}';

  it('JSON: the whole body; a scalar by pointer; null, arrays and objects are not values', () => {
    const f = bodyFields('{"usage":{"total_tokens":42,"x":null,"y":[1]}}', 'application/json', [
      '/usage/total_tokens',
      '/usage/x',
      '/usage/y',
      '/usage',
      '/nope',
    ]);
    expect(f.values).toEqual({ '/usage/total_tokens': 42 });
    expect(f.missing['/usage/x']).toMatch(/null/);
    expect(f.missing['/usage/y']).toMatch(/array/);
    expect(f.missing['/usage']).toMatch(/object/);
    expect(f.missing['/nope']).toMatch(/not in the whole body/);
    expect(bodyFields('not json', undefined, ['/usage/total_tokens']).missing['/usage/total_tokens']).toMatch(
      /not JSON/,
    );
  });

  it('SSE: the second-to-last complete event; a stream cut short reads another event', () => {
    const full = sse(['{"choices":[{"delta":{"content":"hi"}}]}', usage, '[DONE]']);
    expect(bodyFields(full, 'text/event-stream; charset=utf-8', ['/usage/total_tokens']).values).toEqual({
      '/usage/total_tokens': 42,
    });
    // cut inside [DONE]: the usage event is now the last complete one, the chunk before it is read
    const cut = full.slice(0, full.length - 4);
    const f = bodyFields(cut, 'text/event-stream', ['/usage/total_tokens']);
    expect(f.values).toEqual({});
    expect(f.source).toBe('event 1 of 2');
    expect(bodyFields(sse(['[DONE]']), 'text/event-stream', ['/a']).missing['/a']).toMatch(
      /1 complete event/,
    );
    // comments, CRLF, multi-line data, events without data
    expect(sseEvents(': keep-alive\r\ndata: a\r\ndata: b\r\n\r\nevent: ping\n\ndata: c\n\n')).toEqual([
      'a\nb',
      'c',
    ]);
  });
});
