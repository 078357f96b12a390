// OpenTelemetry tracing: the controller makes one span per reconcile through @opentelemetry/api (a
// no-op until a tracer provider is registered). The binaries register one from the standard
// environment variables: OTEL_TRACES_EXPORTER=otlp (the default when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set) sends OTLP/HTTP JSON; =console prints spans; =none or
// nothing set: no tracing. The OTLP/HTTP JSON exporter is written here (a few lines of JSON) so that
// no protobuf dependency with install scripts comes in.
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { type Attributes, SpanStatusCode, trace } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  type ReadableSpan,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';

export const tracer = () => trace.getTracer('cascade');

/**
 * Runs `run` in an active span with `attributes`; the attributes `run` returns are added at the end.
 * A failure is recorded on the span, with the attributes `failed` gives, and thrown again.
 */
export function inSpan(
  name: string,
  attributes: Attributes,
  run: () => Promise<Attributes>,
  failed: () => Attributes,
): Promise<void> {
  return tracer().startActiveSpan(name, { attributes }, async (span) => {
    try {
      span.setAttributes(await run());
    } catch (e) {
      span.setAttributes(failed());
      span.recordException(e as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: String(e) });
      throw e;
    } finally {
      span.end();
    }
  });
}

type AnyValue =
  | { stringValue: string }
  | { boolValue: boolean }
  | { intValue: string }
  | { doubleValue: number };

function anyValue(v: unknown): AnyValue {
  if (typeof v === 'boolean') return { boolValue: v };
  if (typeof v === 'number') return Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v };
  return { stringValue: String(v) };
}

const nanos = (t: [number, number]) => (BigInt(t[0]) * 1_000_000_000n + BigInt(t[1])).toString();

/** The OTLP/HTTP JSON body for a batch of spans (opentelemetry-proto ExportTraceServiceRequest). */
export function otlpJson(spans: ReadableSpan[], serviceName: string): unknown {
  return {
    resourceSpans: [
      {
        resource: { attributes: [{ key: 'service.name', value: { stringValue: serviceName } }] },
        scopeSpans: [
          {
            scope: { name: 'cascade' },
            spans: spans.map((s) => ({
              traceId: s.spanContext().traceId,
              spanId: s.spanContext().spanId,
              ...(s.parentSpanContext?.spanId ? { parentSpanId: s.parentSpanContext.spanId } : {}),
              name: s.name,
              kind: s.kind + 1, // api SpanKind INTERNAL=0 -> proto SPAN_KIND_INTERNAL=1
              startTimeUnixNano: nanos(s.startTime),
              endTimeUnixNano: nanos(s.endTime),
              attributes: Object.entries(s.attributes).map(([key, v]) => ({ key, value: anyValue(v) })),
              status: { code: s.status.code, ...(s.status.message ? { message: s.status.message } : {}) },
            })),
          },
        ],
      },
    ],
  };
}

export class OtlpJsonExporter implements SpanExporter {
  private readonly url: URL;
  private readonly serviceName: string;

  constructor(url: string, serviceName: string) {
    this.url = new URL(url);
    this.serviceName = serviceName;
  }

  export(spans: ReadableSpan[], done: (r: { code: number; error?: Error }) => void): void {
    const body = JSON.stringify(otlpJson(spans, this.serviceName));
    const req = (this.url.protocol === 'https:' ? httpsRequest : httpRequest)(
      this.url,
      { method: 'POST', headers: { 'content-type': 'application/json' }, timeout: 10_000 },
      (res) => {
        res.resume();
        res.on('end', () =>
          done(
            res.statusCode && res.statusCode < 300
              ? { code: 0 }
              : { code: 1, error: new Error(`OTLP export: HTTP ${res.statusCode}`) },
          ),
        );
      },
    );
    req.on('error', (error) => done({ code: 1, error }));
    req.on('timeout', () => req.destroy(new Error('OTLP export: timeout')));
    req.end(body);
  }

  async shutdown(): Promise<void> {}
}

/** Registers a tracer provider from the OTEL_* environment; returns its shutdown (flushes spans). */
export function setupTracing(
  serviceName: string,
  env: NodeJS.ProcessEnv = process.env,
): (() => Promise<void>) | undefined {
  const endpoint =
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ??
    (env.OTEL_EXPORTER_OTLP_ENDPOINT
      ? `${env.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/$/, '')}/v1/traces`
      : undefined);
  const which = env.OTEL_TRACES_EXPORTER ?? (endpoint ? 'otlp' : 'none');
  let exporter: SpanExporter;
  if (which === 'console') exporter = new ConsoleSpanExporter();
  else if (which === 'otlp')
    exporter = new OtlpJsonExporter(endpoint ?? 'http://localhost:4318/v1/traces', serviceName);
  else return undefined;
  const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] });
  trace.setGlobalTracerProvider(provider);
  return () => provider.shutdown();
}
