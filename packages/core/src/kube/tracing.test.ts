import { createServer } from 'node:http';
import { trace } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { OtlpJsonExporter, otlpJson, setupTracing } from './tracing.ts';

function spans() {
  const mem = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(mem)] });
  const t = provider.getTracer('test');
  const s = t.startSpan('reconcile', { attributes: { 'cascade.key': 'sync', 'cascade.writes': 3 } });
  s.setAttribute('cascade.full', false);
  s.end();
  return mem.getFinishedSpans();
}

describe('tracing', () => {
  it('encodes spans as OTLP/HTTP JSON with typed attributes', () => {
    const body = otlpJson(spans(), 'limitpolicy-controller') as {
      resourceSpans: {
        resource: { attributes: unknown[] };
        scopeSpans: { spans: Record<string, unknown>[] }[];
      }[];
    };
    const rs = body.resourceSpans[0]!;
    expect(rs.resource.attributes).toEqual([
      { key: 'service.name', value: { stringValue: 'limitpolicy-controller' } },
    ]);
    const s = rs.scopeSpans[0]!.spans[0]!;
    expect(s.name).toBe('reconcile');
    expect(s.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(s.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(s.kind).toBe(1);
    expect(BigInt(s.endTimeUnixNano as string) >= BigInt(s.startTimeUnixNano as string)).toBe(true);
    expect(s.attributes).toEqual([
      { key: 'cascade.key', value: { stringValue: 'sync' } },
      { key: 'cascade.writes', value: { intValue: '3' } },
      { key: 'cascade.full', value: { boolValue: false } },
    ]);
  });

  it('posts the batch to the collector and reports HTTP failures', async () => {
    const got: { url?: string; type?: string; body: string }[] = [];
    let status = 200;
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        got.push({ url: req.url, type: req.headers['content-type'], body });
        res.statusCode = status;
        res.end('{}');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    try {
      const ex = new OtlpJsonExporter(`http://127.0.0.1:${port}/v1/traces`, 'svc');
      const ok = await new Promise<{ code: number }>((r) => ex.export(spans(), r));
      expect(ok.code).toBe(0);
      expect(got[0]!.url).toBe('/v1/traces');
      expect(got[0]!.type).toBe('application/json');
      expect(JSON.parse(got[0]!.body).resourceSpans[0].scopeSpans[0].spans[0].name).toBe('reconcile');
      status = 503;
      const bad = await new Promise<{ code: number; error?: Error }>((r) => ex.export(spans(), r));
      expect(bad.code).toBe(1);
      expect(String(bad.error)).toContain('HTTP 503');
    } finally {
      server.close();
    }
  });

  it('is off unless the OTEL environment asks for it', () => {
    expect(setupTracing('x', {})).toBeUndefined();
    expect(
      setupTracing('x', { OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }),
    ).toBeUndefined();
    const stop = setupTracing('x', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9/' });
    expect(stop).toBeTypeOf('function');
    expect(trace.getTracer('cascade').startSpan('probe').isRecording()).toBe(true);
    return stop!();
  });
});
