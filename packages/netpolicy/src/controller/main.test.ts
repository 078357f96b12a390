// The netpolicy-controller binary's flags: --help names controller-runtime's flags, --version, and bad
// values are one clear line and exit 2 before anything touches the API server.
// One test per invocation: each starts a Node process that loads the controller's import graph, a
// few seconds on a busy machine (CI runs these beside the cluster e2e), so one test for all nine
// ran past the test timeout there.
import { join } from 'node:path';
import { runScript } from '@cascade/core/testing';
import { describe, expect, it } from 'vitest';

describe('netpolicy-controller flags', () => {
  const ctl = join(import.meta.dirname, 'main.ts');
  const runCtl = (args: string[]) => runScript(ctl, args);
  it('--help names controller-runtime flags', async () => {
    const h = await runCtl(['--help']);
    expect(h.code).toBe(0);
    for (const f of [
      '--metrics-bind-address',
      '--health-probe-bind-address',
      '--leader-elect-lease-duration',
      '--resync-period',
      '--zap-log-level',
      '--rules-analysis-interval',
      '--namespace-entry-budget',
      '--slice-updates-batch-period',
    ])
      expect(h.stdout).toContain(f);
  });
  it('--version', async () => {
    expect((await runCtl(['--version'])).stdout).toMatch(/^netpolicy-controller \d+\.\d+\.\d+\n$/);
  });
  it.each([
    [['--resync-period', '0'], /--resync-period: "0" is not a whole number of seconds/],
    [['--kubeconfig', '/nonexistent'], /cannot load the kubeconfig \(\/nonexistent\)/],
    [['--health-probe-bind-address', 'x'], /--health-probe-bind-address: "x" is not a bind address/],
    [['--rules-analysis-interval', '0'], /--rules-analysis-interval: "0" is not a whole number of seconds/],
    [['--namespace-entry-budget=-5'], /--namespace-entry-budget: "-5" is not a whole number of entries/],
    [['--slice-updates-batch-period=5'], /--slice-updates-batch-period: "5" is not a duration from 0 to 10s/],
    [['--tenant-label=example.com/'], /--tenant-label: "example.com\/" is not a label key/],
    [['--slice-updates-batch-period=1m'], /--slice-updates-batch-period: "1m" is not a duration/],
  ] as const)('%j exits 2 with one clear line', async (args, msg) => {
    const r = await runCtl([...args]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(msg);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});
