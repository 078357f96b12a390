// The agent binary's flags: --help describes them, --version, and bad values are one clear line and
// exit 2 before anything touches the kernel or the API server.
import { join } from 'node:path';
import { runScript } from '@cascade/core/testing';
import { describe, expect, it } from 'vitest';

const main = join(import.meta.dirname, 'main.ts');
const run = (args: string[], env: Record<string, string> = {}) => {
  const { NODE_NAME: _, ...rest } = process.env;
  return runScript(main, args, { env: { ...rest, ...env } });
};

describe('cascade-netpol-agent flags', () => {
  it('--help and --version', async () => {
    const h = await run(['--help']);
    expect(h.code).toBe(0);
    for (const f of [
      '--node-name',
      '--pin-dir',
      '--metrics-bind-address',
      '--cni-record-dir',
      '--namespace-entry-budget',
      '--pod-source',
      '--service-namespace-frontends',
      '--service-namespace-backends',
      '--service-reserved-namespaces',
      '--zap-log-level',
      '--kubeconfig',
    ])
      expect(h.stdout).toContain(f);
    const v = await run(['--version']);
    expect(v.stdout).toMatch(/^cascade-netpol-agent \d+\.\d+\.\d+\n$/);
  });

  it.each([
    [[], {}, /--node-name \(or NODE_NAME .*\) is required/],
    [
      ['--node-name', 'n1', '--namespace-entry-budget=-5'],
      {},
      /--namespace-entry-budget: "-5" is not a whole number/,
    ],
    [['--node-name', 'n1', '--zap-log-level', 'loud'], {}, /--zap-log-level: "loud" is not one of/],
    [
      ['--node-name', 'n1', '--metrics-bind-address', 'anywhere'],
      {},
      /--metrics-bind-address: "anywhere" is not a bind address/,
    ],
    [[], { NODE_NAME: 'n1', CASCADE_LOG_LEVEL: 'loud' }, /--zap-log-level: "loud"/],
    [['--node-name', 'n1', '--pod-source', 'all'], {}, /--pod-source: "all" is not one of pods, slices/],
    [
      ['--node-name', 'n1', '--tenant-label', 'team name'],
      {},
      /--tenant-label: "team name" is not a label key/,
    ],
    [[], { NODE_NAME: 'n1', CASCADE_POD_SOURCE: 'x' }, /--pod-source: "x"/],
    [
      ['--node-name', 'n1', '--service-reserved-namespaces', 'kube-system,Bad_NS'],
      {},
      /--service-reserved-namespaces: "Bad_NS" is not a namespace name/,
    ],
    [
      [],
      { NODE_NAME: 'n1', CASCADE_SERVICE_NAMESPACE_FRONTENDS: 'many' },
      /--service-namespace-frontends: "many" is not a whole number/,
    ],
    [['--no-such-flag'], {}, /Unknown option '--no-such-flag'/],
  ])('%j %j exits 2 with one clear line', async (args, env, msg) => {
    const r = await run(args, env);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(msg);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});
