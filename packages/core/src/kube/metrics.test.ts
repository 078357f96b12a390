// Metrics through prom-client: families render in the Prometheus text format, each registry stands
// alone (several controllers in one process), and the work queue reports controller-runtime's
// workqueue_* and controller_runtime_reconcile_* families, retries and failures included.
import { describe, expect, it } from 'vitest';
import { jsonLogger } from './logging.ts';
import { Metrics } from './metrics.ts';
import { WorkQueue } from './queue.ts';

describe('Metrics', () => {
  it('renders counters, gauges, labelled families and histograms; registries are independent', async () => {
    const a = new Metrics();
    const b = new Metrics();
    const c = a.counter('t_total', 'a counter');
    c.inc();
    c.inc(2);
    expect(c.get()).toBe(3);
    b.counter('t_total', 'same name, other registry').inc();
    a.gauge('t_gauge', 'a gauge', () => 7);
    a.family('t_family', 'a family', ['kind', 'reason'], () => [[{ kind: 'K', reason: 'a "q"' }, 2]]);
    a.counterFrom('t_kernel_total', 'read elsewhere', () => 41);
    a.histogram('t_seconds', 'a histogram', [0.1, 1]).observe(0.5);
    const text = await a.render();
    expect(text).toMatch(/# TYPE t_total counter\nt_total 3\n/);
    expect(text).toMatch(/\nt_gauge 7\n/);
    expect(text).toMatch(/\nt_family\{kind="K",reason="a \\"q\\""\} 2\n/);
    expect(text).toMatch(/\nt_kernel_total 41\n/);
    expect(text).toMatch(/\nt_seconds_bucket\{le="0.1"\} 0\nt_seconds_bucket\{le="1"\} 1\n/);
    expect(await b.render()).toMatch(/\nt_total 1\n/);
  });

  it('process and Node.js families come from the library defaults', async () => {
    const m = new Metrics();
    m.processMetrics();
    const text = await m.render();
    for (const f of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'process_open_fds',
      'nodejs_heap_size_used_bytes',
      'nodejs_eventloop_lag_p99_seconds',
      'nodejs_gc_duration_seconds',
    ])
      expect(text).toContain(`# TYPE ${f} `);
  });

  it('the work queue reports adds, waits, work, retries, results and depth', async () => {
    const m = new Metrics();
    let fail = 1;
    const q = new WorkQueue(
      async (key) => {
        if (key === 'bad' && fail-- > 0) throw new Error('once');
        await new Promise((r) => setTimeout(r, 5));
      },
      2,
      { registry: m, name: 'demo' },
    );
    q.add('a');
    q.add('bad');
    await q.drain();
    await new Promise((r) => setTimeout(r, 400)); // the retry of `bad` (200 ms backoff)
    await q.drain();
    const text = await m.render();
    expect(text).toMatch(/\nworkqueue_adds_total\{name="demo"\} 3\n/); // a, bad, bad again
    expect(text).toMatch(/\nworkqueue_retries_total\{name="demo"\} 1\n/);
    expect(text).toMatch(/\nworkqueue_depth\{name="demo"\} 0\n/);
    expect(text).toMatch(/\nworkqueue_queue_duration_seconds_count\{name="demo"\} 3\n/);
    expect(text).toMatch(/\nworkqueue_work_duration_seconds_count\{name="demo"\} 3\n/);
    expect(text).toMatch(/\ncontroller_runtime_reconcile_total\{controller="demo",result="success"\} 2\n/);
    expect(text).toMatch(/\ncontroller_runtime_reconcile_total\{controller="demo",result="error"\} 1\n/);
    expect(text).toMatch(/\ncontroller_runtime_reconcile_errors_total\{controller="demo"\} 1\n/);
    expect(text).toMatch(/\ncontroller_runtime_active_workers\{controller="demo"\} 0\n/);
    expect(text).toMatch(/\nworkqueue_longest_running_processor_seconds\{name="demo"\} 0\n/);
    q.stop();
  });
});

describe('jsonLogger', () => {
  it('drops lines less severe than the level asked for', () => {
    const lines: string[] = [];
    const log = jsonLogger('t', (l) => lines.push(l), 'warn');
    log('info', 'quiet');
    log('warn', 'loud', { k: 1 });
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 'warn', component: 't', msg: 'loud', k: 1 });
  });
});

describe('watchHealth and leaseHealth', () => {
  it('count errors, log once when failing and once on recovery, then run the pending work', async () => {
    const { leaseHealth, leaderMetrics } = await import('./leadership.ts');
    const { watchHealth } = await import('./health.ts');
    const m = new Metrics();
    const lines: [string, string, Record<string, unknown> | undefined][] = [];
    const log = (level: string, msg: string, fields?: Record<string, unknown>) => {
      lines.push([level, msg, fields]);
    };
    const inf = { onError: () => {}, onHealth: () => {} } as unknown as import('./informer.ts').Informer;
    let recovered = 0;
    watchHealth([inf], m, log as never, 'the datapath keeps what it enforces', () => recovered++);
    inf.onError('refused');
    inf.onError('refused');
    inf.onHealth('/api/v1/pods', 'connect ECONNREFUSED');
    inf.onHealth('/api/v1/pods', undefined);
    expect(await m.render()).toMatch(/\ncascade_watch_errors_total 2\n/);
    expect(lines.map(([l, msg]) => `${l} ${msg}`)).toEqual([
      'warn list/watch failing: retrying with backoff; the datapath keeps what it enforces',
      'info list/watch recovered',
    ]);
    expect(lines[0]![2]).toEqual({ path: '/api/v1/pods', error: 'connect ECONNREFUSED' });
    expect(recovered).toBe(1);
    const elector = { onError: (_e?: string) => {} } as unknown as import('./leader.ts').LeaderElector;
    const { leaseErrors } = leaderMetrics(m, 'x-leader', () => false);
    leaseHealth(elector, leaseErrors, log as never);
    elector.onError('forbidden');
    elector.onError(undefined);
    expect(leaseErrors.get()).toBe(1);
    expect(lines.slice(2).map(([l]) => l)).toEqual(['warn', 'info']);
  });
});
