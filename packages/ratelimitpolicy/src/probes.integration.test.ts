// Operating the controller (against kube-apiserver): metrics and probes on controller-runtime's bind
// addresses, /readyz failing while the API server is unreachable, every failing watch and lease renewal
// logged once per state change and counted; the binary's flags, --help, and a bad kubeconfig reported
// in one line (exit 2), not a stack trace.
import { createServer } from 'node:net';
import { join } from 'node:path';
import { effectivePolicyCrd, type PolicyController, policyCrd } from '@cascade/core';
import { parseBindAddress } from '@cascade/core/kube';
import { createNamespace, runScript, startController } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, waitFor } from '@cascade/envtest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rateLimitPolicyKind } from './kind.ts';

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
const get = async (port: number, path: string) => {
  try {
    const r = await fetch(`http://127.0.0.1:${port}${path}`);
    return { status: r.status, text: await r.text() };
  } catch {
    return { status: 0, text: '' };
  }
};
const main = join(import.meta.dirname, 'main.ts');
const runMain = (args: string[], env: Record<string, string> = {}) =>
  runScript(main, args, { env: { ...process.env, ...env } });

describe('bind addresses', () => {
  it('parses controller-runtime bind addresses and refuses others', () => {
    expect(parseBindAddress(':8080', 'f')).toEqual({ port: 8080 });
    expect(parseBindAddress('127.0.0.1:9', 'f')).toEqual({ host: '127.0.0.1', port: 9 });
    expect(parseBindAddress('[::1]:8081', 'f')).toEqual({ host: '::1', port: 8081 });
    expect(parseBindAddress('0', 'f')).toBeUndefined();
    for (const bad of ['8080', ':99999', 'localhost', ':port'])
      expect(() => parseBindAddress(bad, '--x')).toThrow(/--x/);
  });
});

describe.skipIf(!apiServerTestsEnabled())('probes, metrics and errors of a running controller', () => {
  let env: Envtest;
  let controller: PolicyController;
  const logs: { level: string; msg: string }[] = [];
  let metricsPort = 0;
  let probePort = 0;

  beforeAll(async () => {
    env = await Envtest.start({ crdObjects: [effectivePolicyCrd, policyCrd(rateLimitPolicyKind)] });
    await createNamespace(env, 'cascade-system');
    metricsPort = await freePort();
    probePort = await freePort();
    controller = await startController(env, rateLimitPolicyKind, {
      leaseNamespace: 'cascade-system',
      metricsBindAddress: { host: '127.0.0.1', port: metricsPort },
      healthProbeBindAddress: { host: '127.0.0.1', port: probePort },
      log: (level, msg) => logs.push({ level, msg }),
    });
  }, 120_000);

  afterAll(async () => {
    await controller?.stop({ releaseLease: false });
    await env?.stop();
  }, 60_000);

  it('serves /metrics on the metrics address and /healthz, /readyz on the probe address', async () => {
    expect((await get(probePort, '/readyz')).status).toBe(200);
    expect((await get(probePort, '/healthz')).status).toBe(200);
    expect((await get(probePort, '/metrics')).status).toBe(404);
    const m = await get(metricsPort, '/metrics');
    expect(m.status).toBe(200);
    expect(m.text).toMatch(/# TYPE cascade_watch_errors_total counter/);
    expect(m.text).toMatch(/\ncascade_leader [01]\n/);
    // the conventional process and Node.js families
    for (const f of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'process_open_fds',
      'nodejs_heap_size_used_bytes',
      'nodejs_eventloop_lag_p99_seconds',
    ])
      expect(m.text).toMatch(new RegExp(`\\n${f} [\\d.e+-]+\\n`));
    // controller-runtime's workqueue and reconcile families, client-go's leader-election gauge
    for (const f of [
      /\nworkqueue_adds_total\{name="[\w-]+"\} [1-9]\d*\n/,
      /\nworkqueue_depth\{name="[\w-]+"\} \d+\n/,
      /\nworkqueue_queue_duration_seconds_count\{name="[\w-]+"\} [1-9]\d*\n/,
      /\nworkqueue_work_duration_seconds_bucket\{le="\+Inf",name="[\w-]+"\} [1-9]\d*\n/,
      /# TYPE workqueue_retries_total counter/,
      /\nworkqueue_longest_running_processor_seconds\{name="[\w-]+"\} [\d.e+-]+\n/,
      /\ncontroller_runtime_reconcile_total\{controller="[\w-]+",result="success"\} [1-9]\d*\n/,
      /\ncontroller_runtime_reconcile_time_seconds_count\{controller="[\w-]+"\} [1-9]\d*\n/,
      /\ncontroller_runtime_max_concurrent_reconciles\{controller="[\w-]+"\} 2\n/,
      /\nleader_election_master_status\{name="[\w-]+-leader"\} [01]\n/,
    ])
      expect(m.text).toMatch(f);
    expect((await get(metricsPort, '/readyz')).status).toBe(404);
  });

  it('while the API server is down: /readyz fails, each failing watch is logged once and counted; then it recovers', async () => {
    await env.stopApiServer();
    await waitFor(
      'not ready',
      async () => ((await get(probePort, '/readyz')).status === 503 ? true : undefined),
      30_000,
    );
    await new Promise((r) => setTimeout(r, 4000)); // several retries of every watch and of the lease
    const failing = logs.filter((l) => /list\/watch failing/.test(l.msg)).length;
    // once per informer (state change), not once per retry
    expect(failing).toBeGreaterThan(0);
    expect(failing).toBeLessThanOrEqual(16);
    expect(logs.some((l) => /lease acquire\/renew failing/.test(l.msg))).toBe(true);
    const m = await get(metricsPort, '/metrics');
    expect(Number(/\ncascade_watch_errors_total (\d+)/.exec(m.text)?.[1])).toBeGreaterThan(failing);
    await env.startApiServer();
    await waitFor(
      'ready again',
      async () => ((await get(probePort, '/readyz')).status === 200 ? true : undefined),
      60_000,
    );
    expect(logs.some((l) => /list\/watch recovered/.test(l.msg))).toBe(true);
  });
});

describe('the controller binary', () => {
  it('--help describes the flags; a bad kubeconfig or flag is one clear line and exit 2', async () => {
    const help = await runMain(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/--metrics-bind-address/);
    expect(help.stdout).toMatch(/--health-probe-bind-address/);
    const v = await runMain(['--version']);
    expect(v.code).toBe(0);
    expect(v.stdout).toMatch(/^ratelimitpolicy-controller \d+\.\d+\.\d+/);
    const bad = await runMain(['--kubeconfig', '/nonexistent/kubeconfig']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(
      /^ratelimitpolicy-controller: cannot load the kubeconfig \(\/nonexistent\/kubeconfig\)/,
    );
    expect(bad.stderr).not.toMatch(/\n\s+at /); // no stack trace
    const flag = await runMain(['--metrics-bind-address', 'everywhere']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toMatch(/--metrics-bind-address: "everywhere" is not a bind address/);
    for (const f of [
      '--zap-log-level',
      '--max-concurrent-writes',
      '--resync-period',
      '--leader-elect-lease-duration',
    ])
      expect(help.stdout).toContain(f);
    const lvl = await runMain(['--zap-log-level', 'chatty']);
    expect(lvl.code).toBe(2);
    expect(lvl.stderr).toMatch(/--zap-log-level: "chatty" is not one of debug, info, warn, error/);
    const w = await runMain(['--max-concurrent-writes', '0']);
    expect(w.code).toBe(2);
    expect(w.stderr).toMatch(/--max-concurrent-writes: "0" is not a whole number of writes from 1 to 256/);
  });
});
