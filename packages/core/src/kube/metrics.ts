// Metrics through prom-client (one Registry per controller or agent, so several can live in one
// process as they do in tests), served by health.ts. The conventional process_* and
// nodejs_* families come from prom-client's default collectors; the workqueue_* and
// controller_runtime_* families follow controller-runtime's names so its dashboards and alerts apply.
import { readdirSync } from 'node:fs';
import type { Server } from 'node:http';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { type BindAddress, type ExtraRoutes, serveHttp } from './health.ts';

export type Labels = Record<string, string>;

const DEFAULT_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5];

export class Metrics {
  readonly registry = new Registry();

  /** A counter kept here; get() reads it back (tests, spans). */
  counter(name: string, help: string): { inc(n?: number): void; get(): number } {
    const c = new Counter({ name, help, registers: [this.registry] });
    let value = 0;
    return {
      inc: (n = 1) => {
        value += n;
        c.inc(n);
      },
      get: () => value,
    };
  }

  /** A gauge read when scraped. */
  gauge(name: string, help: string, value: () => number): void {
    new Gauge({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.set(value());
      },
    });
  }

  /** A labelled family read when scraped: one sample per label set. */
  family(name: string, help: string, labelNames: readonly string[], samples: () => [Labels, number][]): void {
    new Gauge({
      name,
      help,
      labelNames,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [labels, v] of samples()) this.set(labels, v);
      },
    });
  }

  /** A labelled counter kept here: `inc(labels)`. */
  counterVec(
    name: string,
    help: string,
    labelNames: readonly string[],
  ): { inc(labels: Labels, n?: number): void } {
    const c = new Counter({ name, help, labelNames, registers: [this.registry] });
    return { inc: (labels, n = 1) => c.inc(labels, n) };
  }

  /** A labelled histogram kept here: `observe(labels, seconds)`. */
  histogramVec(
    name: string,
    help: string,
    labelNames: readonly string[],
    buckets = DEFAULT_BUCKETS,
  ): { observe(labels: Labels, v: number): void } {
    const h = new Histogram({ name, help, labelNames, buckets, registers: [this.registry] });
    return { observe: (labels, v) => h.observe(labels, v) };
  }

  /**
   * The conventional process and Node.js families operators alert on: prom-client's defaults
   * (process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds,
   * process_start_time_seconds, nodejs_heap_size_used_bytes, nodejs_eventloop_lag_p99_seconds, GC
   * durations, ...). On a platform without /proc the file-descriptor gauge reads 0.
   */
  processMetrics(): void {
    collectDefaultMetrics({ register: this.registry });
    if (!this.registry.getSingleMetric('process_open_fds'))
      this.gauge('process_open_fds', 'Number of open file descriptors.', () => {
        try {
          return readdirSync('/proc/self/fd').length;
        } catch {
          return 0;
        }
      });
  }

  /** A counter kept elsewhere (e.g. in the kernel), read when scraped. */
  /** A counter family whose values are kept elsewhere (cumulative, by labels), read at each scrape. */
  counterFamily(
    name: string,
    help: string,
    labelNames: readonly string[],
    samples: () => [Labels, number][],
  ): void {
    new Counter({
      name,
      help,
      labelNames,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [labels, v] of samples()) this.inc(labels, Math.max(0, v));
      },
    });
  }

  counterFrom(name: string, help: string, value: () => number): void {
    new Counter({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(Math.max(0, value()));
      },
    });
  }

  histogram(name: string, help: string, buckets = DEFAULT_BUCKETS): { observe(v: number): void } {
    const h = new Histogram({ name, help, buckets, registers: [this.registry] });
    return { observe: (v) => h.observe(v) };
  }

  /** The Prometheus text exposition of everything registered. */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  /** Serves /metrics, /healthz and /readyz (ready() decides) on 127.0.0.1. Port 0 picks a free port. */
  serve(port: number, ready: () => boolean, extra?: ExtraRoutes): Promise<Server> {
    return this.serveOn({ host: '127.0.0.1', port }, ready, 'all', extra);
  }

  /**
   * Serves on a bind address: `what` is 'metrics' (/metrics), 'probes' (/healthz, /readyz) or 'all'
   * (health.ts). Rejects when the address cannot be bound (in use, not an address of this host).
   */
  serveOn(
    addr: BindAddress,
    ready: () => boolean,
    what: 'metrics' | 'probes' | 'all',
    extra?: ExtraRoutes,
  ): Promise<Server> {
    return serveHttp(
      { render: () => this.render(), contentType: this.registry.contentType },
      addr,
      ready,
      what,
      extra,
    );
  }
}
