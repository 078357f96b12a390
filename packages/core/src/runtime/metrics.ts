// Metrics in the Prometheus text format, /healthz and /readyz, and JSON logs.
import { readdirSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';

export class Metrics {
  private readonly counters = new Map<string, { help: string; value: number }>();
  private readonly gauges = new Map<
    string,
    { help: string; value: () => number; type: 'gauge' | 'counter' }
  >();
  private readonly families = new Map<
    string,
    { help: string; type: 'gauge' | 'counter'; samples: () => [Record<string, string>, number][] }
  >();
  private readonly histograms = new Map<
    string,
    { help: string; sum: number; count: number; buckets: number[]; counts: number[] }
  >();

  counter(name: string, help: string): { inc(n?: number): void; get(): number } {
    let c = this.counters.get(name);
    if (!c) this.counters.set(name, (c = { help, value: 0 }));
    const cc = c;
    return { inc: (n = 1) => void (cc.value += n), get: () => cc.value };
  }

  gauge(name: string, help: string, value: () => number): void {
    this.gauges.set(name, { help, value, type: 'gauge' });
  }

  /** A labelled family, read when rendered: one sample per label set (`name{a="x",b="y"} v`). */
  family(
    name: string,
    help: string,
    type: 'gauge' | 'counter',
    samples: () => [Record<string, string>, number][],
  ): void {
    this.families.set(name, { help, type, samples });
  }

  /** A labelled counter kept here: `inc(labels)`. */
  counterVec(name: string, help: string): { inc(labels: Record<string, string>, n?: number): void } {
    const values = new Map<string, [Record<string, string>, number]>();
    this.family(name, help, 'counter', () => [...values.values()]);
    return {
      inc: (labels, n = 1) => {
        const k = JSON.stringify(labels);
        const v = values.get(k);
        if (v) v[1] += n;
        else values.set(k, [labels, n]);
      },
    };
  }

  /**
   * The conventional process and Node.js families operators alert on (names as prom-client's
   * defaults): CPU seconds, resident memory, start time, open file descriptors, heap, event-loop lag.
   */
  processMetrics(): void {
    const lag = monitorEventLoopDelay({ resolution: 20 });
    lag.enable();
    const start = Date.now() / 1000 - process.uptime();
    this.counterFrom('process_cpu_seconds_total', 'User and system CPU time spent, seconds', () => {
      const u = process.cpuUsage();
      return (u.user + u.system) / 1e6;
    });
    this.gauge(
      'process_resident_memory_bytes',
      'Resident memory size, bytes',
      () => process.memoryUsage().rss,
    );
    this.gauge(
      'process_start_time_seconds',
      'Start time of the process since the epoch, seconds',
      () => start,
    );
    this.gauge('process_open_fds', 'Open file descriptors', () => {
      try {
        return readdirSync('/proc/self/fd').length;
      } catch {
        return 0;
      }
    });
    this.gauge('nodejs_heap_size_used_bytes', 'V8 heap used, bytes', () => process.memoryUsage().heapUsed);
    this.gauge('nodejs_heap_size_total_bytes', 'V8 heap total, bytes', () => process.memoryUsage().heapTotal);
    this.gauge(
      'nodejs_eventloop_lag_p99_seconds',
      'Event-loop delay, 99th percentile, seconds',
      () => lag.percentile(99) / 1e9,
    );
    this.gauge('nodejs_eventloop_lag_max_seconds', 'Event-loop delay, maximum, seconds', () => lag.max / 1e9);
  }

  /** A counter kept elsewhere (e.g. in the kernel), read when rendered. */
  counterFrom(name: string, help: string, value: () => number): void {
    this.gauges.set(name, { help, value, type: 'counter' });
  }

  histogram(
    name: string,
    help: string,
    buckets = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
  ): { observe(v: number): void } {
    let h = this.histograms.get(name);
    if (!h)
      this.histograms.set(name, (h = { help, sum: 0, count: 0, buckets, counts: buckets.map(() => 0) }));
    const hh = h;
    return {
      observe: (v) => {
        hh.sum += v;
        hh.count++;
        hh.buckets.forEach((b, i) => {
          if (v <= b) hh.counts[i]!++;
        });
      },
    };
  }

  render(): string {
    const lines: string[] = [];
    for (const [n, c] of this.counters)
      lines.push(`# HELP ${n} ${c.help}`, `# TYPE ${n} counter`, `${n} ${c.value}`);
    for (const [n, g] of this.gauges)
      lines.push(`# HELP ${n} ${g.help}`, `# TYPE ${n} ${g.type}`, `${n} ${g.value()}`);
    const esc = (v: string) => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
    for (const [n, f] of this.families) {
      lines.push(`# HELP ${n} ${f.help}`, `# TYPE ${n} ${f.type}`);
      for (const [labels, v] of f.samples())
        lines.push(
          `${n}{${Object.entries(labels)
            .map(([k, x]) => `${k}="${esc(x)}"`)
            .join(',')}} ${v}`,
        );
    }
    for (const [n, h] of this.histograms) {
      lines.push(`# HELP ${n} ${h.help}`, `# TYPE ${n} histogram`);
      h.buckets.forEach((b, i) => lines.push(`${n}_bucket{le="${b}"} ${h.counts[i]}`));
      lines.push(`${n}_bucket{le="+Inf"} ${h.count}`, `${n}_sum ${h.sum}`, `${n}_count ${h.count}`);
    }
    return `${lines.join('\n')}\n`;
  }

  /** Serves /metrics, /healthz and /readyz (ready() decides) on 127.0.0.1. Port 0 picks a free port. */
  serve(port: number, ready: () => boolean, extra?: ExtraRoutes): Promise<Server> {
    return this.serveOn({ host: '127.0.0.1', port }, ready, 'all', extra);
  }

  /**
   * Serves on a bind address: `what` is 'metrics' (/metrics), 'probes' (/healthz, /readyz) or 'all'.
   * Rejects when the address cannot be bound (in use, not an address of this host).
   */
  serveOn(
    addr: BindAddress,
    ready: () => boolean,
    what: 'metrics' | 'probes' | 'all',
    extra?: ExtraRoutes,
  ): Promise<Server> {
    const metrics = what !== 'probes';
    const probes = what !== 'metrics';
    const server = createServer((req, res) => {
      const path = (req.url ?? '').split('?')[0];
      if (extra?.(req, res)) return;
      if (metrics && path === '/metrics') {
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
        res.end(this.render());
      } else if (probes && path === '/healthz') {
        res.writeHead(200);
        res.end('ok');
      } else if (probes && path === '/readyz') {
        const ok = ready();
        res.writeHead(ok ? 200 : 503);
        res.end(ok ? 'ok' : 'not ready');
      } else {
        res.writeHead(404);
        res.end();
      }
    });
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(addr.port, addr.host, () => resolve(server));
    });
  }
}

/** More routes on the same server (e.g. the agent's /flows): true when it answered. */
export type ExtraRoutes = (req: IncomingMessage, res: ServerResponse) => boolean;

export interface BindAddress {
  /** undefined: every address of the host (IPv4 and IPv6). */
  host?: string;
  port: number;
}

/**
 * A controller-runtime style bind address: `:8080` (all addresses), `127.0.0.1:8080`, `[::1]:8080`;
 * `0` disables (undefined). Throws on anything else, naming the flag.
 */
export function parseBindAddress(text: string, flag: string): BindAddress | undefined {
  if (text === '0') return undefined;
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([0-9A-Za-z.-]*)):(\d{1,5})$/.exec(text);
  const port = m ? Number(m[3]) : Number.NaN;
  if (!m || port > 65535)
    throw new Error(
      `${flag}: "${text}" is not a bind address (e.g. ":8080", "127.0.0.1:8080", "0" to disable)`,
    );
  const host = m[1] ?? m[2];
  return host ? { host, port } : { port };
}

export type Logger = (
  level: 'info' | 'warn' | 'error',
  msg: string,
  fields?: Record<string, unknown>,
) => void;

export const jsonLogger =
  (component: string, out: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): Logger =>
  (level, msg, fields) =>
    out(JSON.stringify({ ts: new Date().toISOString(), level, component, msg, ...fields }));
