// A work queue: events for one key coalesce into one reconcile; failures retry per key with exponential
// backoff; at most `concurrency` reconciles run at once; drain() waits for in-flight work (shutdown).
// With a Metrics registry and a name it reports controller-runtime's workqueue_* and
// controller_runtime_reconcile_* families (label `name`/`controller` = that name).
import type { Metrics } from './metrics.ts';

interface QueueObserver {
  added(): void;
  waited(seconds: number): void;
  worked(seconds: number, ok: boolean): void;
  retried(): void;
}

function observe(m: Metrics, name: string, q: WorkQueue): QueueObserver {
  const l = { name };
  const c = { controller: name };
  const adds = m.counterVec('workqueue_adds_total', 'Total number of adds handled by the workqueue', [
    'name',
  ]);
  const retries = m.counterVec(
    'workqueue_retries_total',
    'Total number of retries handled by the workqueue',
    ['name'],
  );
  const buckets = [1e-5, 1e-4, 1e-3, 0.01, 0.1, 1, 10, 100];
  const wait = m.histogramVec(
    'workqueue_queue_duration_seconds',
    'How long in seconds an item stays in the workqueue before being requested',
    ['name'],
    buckets,
  );
  const work = m.histogramVec(
    'workqueue_work_duration_seconds',
    'How long in seconds processing an item from the workqueue takes',
    ['name'],
    buckets,
  );
  m.family('workqueue_depth', 'Current depth of the workqueue', ['name'], () => [[l, q.depth]]);
  m.family(
    'workqueue_unfinished_work_seconds',
    'Seconds of work in progress not yet observed by work_duration (large values: stuck workers)',
    ['name'],
    () => [[l, q.runningSeconds().reduce((a, b) => a + b, 0)]],
  );
  m.family(
    'workqueue_longest_running_processor_seconds',
    'How many seconds the longest running processor of the workqueue has been running',
    ['name'],
    () => [[l, Math.max(0, ...q.runningSeconds())]],
  );
  const total = m.counterVec(
    'controller_runtime_reconcile_total',
    'Total number of reconciliations per controller',
    ['controller', 'result'],
  );
  const errors = m.counterVec(
    'controller_runtime_reconcile_errors_total',
    'Total number of reconciliation errors per controller',
    ['controller'],
  );
  const time = m.histogramVec(
    'controller_runtime_reconcile_time_seconds',
    'Length of time per reconciliation per controller',
    ['controller'],
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  );
  m.family(
    'controller_runtime_max_concurrent_reconciles',
    'Maximum number of concurrent reconciles per controller',
    ['controller'],
    () => [[c, q.concurrency]],
  );
  m.family(
    'controller_runtime_active_workers',
    'Number of currently used workers per controller',
    ['controller'],
    () => [[c, q.runningSeconds().length]],
  );
  return {
    added: () => adds.inc(l),
    waited: (s) => wait.observe(l, s),
    worked: (s, ok) => {
      work.observe(l, s);
      time.observe(c, s);
      total.inc({ ...c, result: ok ? 'success' : 'error' });
      if (!ok) errors.inc(c);
    },
    retried: () => retries.inc(l),
  };
}

const now = () => performance.now() / 1000;

export class WorkQueue {
  private readonly pending = new Set<string>();
  private readonly running = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private active = 0;
  private stopped = false;
  private idle: (() => void)[] = [];
  private readonly reconcile: (key: string) => Promise<void>;
  readonly concurrency: number;
  /** When each pending key was first added, and when each running key started (seconds). */
  private readonly addedAt = new Map<string, number>();
  private readonly startedAt = new Map<string, number>();
  private readonly observer?: QueueObserver;
  onError?: (key: string, e: unknown) => void;

  constructor(
    reconcile: (key: string) => Promise<void>,
    concurrency = 2,
    metrics?: { registry: Metrics; name: string },
  ) {
    this.reconcile = reconcile;
    this.concurrency = concurrency;
    if (metrics) this.observer = observe(metrics.registry, metrics.name, this);
  }

  /** Seconds each running reconcile has been running. */
  runningSeconds(): number[] {
    const t = now();
    return [...this.startedAt.values()].map((s) => t - s);
  }

  get depth(): number {
    return this.pending.size;
  }

  add(key: string): void {
    if (this.stopped) return;
    this.observer?.added();
    if (!this.addedAt.has(key)) this.addedAt.set(key, now());
    this.pending.add(key);
    this.pump();
  }

  private get pumpable(): boolean {
    return !this.stopped;
  }

  private pump(): void {
    if (!this.pumpable) return;
    for (const key of this.pending) {
      if (this.active >= this.concurrency) return;
      if (this.running.has(key)) continue; // one reconcile per key at a time; re-runs after
      this.pending.delete(key);
      this.running.add(key);
      this.active++;
      const start = now();
      this.observer?.waited(start - (this.addedAt.get(key) ?? start));
      this.addedAt.delete(key);
      this.startedAt.set(key, start);
      const done = (ok: boolean) => {
        this.startedAt.delete(key);
        this.observer?.worked(now() - start, ok);
      };
      void this.reconcile(key)
        .then(() => {
          done(true);
          this.failures.delete(key);
        })
        .catch((e) => {
          done(false);
          this.onError?.(key, e);
          if (this.stopped) return; // no retry after shutdown
          this.observer?.retried();
          const n = (this.failures.get(key) ?? 0) + 1;
          this.failures.set(key, n);
          const t = setTimeout(
            () => {
              this.timers.delete(key);
              this.add(key);
            },
            Math.min(100 * 2 ** n, 30_000),
          );
          this.timers.set(key, t);
        })
        .finally(() => {
          this.running.delete(key);
          this.active--;
          this.pump();
          if (this.active === 0 && this.pending.size === 0) for (const f of this.idle.splice(0)) f();
        });
    }
  }

  /** Resolves when nothing is pending or running. */
  async drain(): Promise<void> {
    if (this.active === 0 && (this.pending.size === 0 || this.stopped)) return;
    await new Promise<void>((r) => this.idle.push(r));
  }

  stop(): void {
    this.stopped = true;
    this.pending.clear();
    this.addedAt.clear();
    for (const t of this.timers.values()) clearTimeout(t);
    if (this.active === 0) for (const f of this.idle.splice(0)) f();
  }
}
