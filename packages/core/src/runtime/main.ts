// A controller binary's main: flags (controller-runtime's names where one exists), kubeconfig, the
// controller, SIGTERM. Split from controller.ts: this is the edge that reads argv and the process.
import type { PolicyKind } from '../kind.ts';
import { PolicyController } from './controller.ts';
import { type BindAddress, jsonLogger, LOG_LEVELS, type LogLevel, parseBindAddress } from './metrics.ts';
import { setupTracing } from './tracing.ts';

/** A kind's own setting as a flag of its binary (e.g. --limitador-namespace). */
export interface SettingFlag {
  flag: string;
  key: string;
  default: string;
  help: string;
}

const USAGE = (name: string, extra: readonly SettingFlag[] = []) => `Usage: ${name} [flags]

Flags (controller-runtime's names):
  --metrics-bind-address ADDR        /metrics (default ":8080"; "0" disables)
  --health-probe-bind-address ADDR   /healthz and /readyz (default ":8081")
  --leader-elect-lease-duration S    lease duration in seconds (default 15)
  --leader-election-namespace NS     namespace of the Lease (default $POD_NAMESPACE or cascade-system)
  --resync-period S                  full reconcile at least this often (default 600)
  --max-concurrent-writes N          API writes in flight at once within a reconcile (default 8)
  --zap-log-level LEVEL              debug|info|warn|error: the least severe level logged (default info)
  --kubeconfig PATH                  kubeconfig (default: in-cluster, then $KUBECONFIG, ~/.kube/config)
${extra.map((s) => `  --${`${s.flag} VALUE`.padEnd(33)}${s.help} (default "${s.default}")\n`).join('')}  --version                          the version
  -h, --help                         this text
`;

/** A controller binary's main: flags, kubeconfig, the controller, SIGTERM. Exits 2 on bad input. */
export async function runPolicyController(
  kind: PolicyKind,
  name: string,
  settingFlags: readonly SettingFlag[] = [],
): Promise<PolicyController> {
  const { parseArgs } = await import('node:util');
  const fail = (msg: string): never => {
    process.stderr.write(`${name}: ${msg}\n`);
    process.exit(2);
  };
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      options: {
        'metrics-bind-address': { type: 'string', default: ':8080' },
        'health-probe-bind-address': { type: 'string', default: ':8081' },
        'leader-elect-lease-duration': { type: 'string', default: '15' },
        'leader-election-namespace': { type: 'string' },
        'resync-period': { type: 'string', default: '600' },
        'max-concurrent-writes': { type: 'string', default: '8' },
        'zap-log-level': { type: 'string', default: 'info' },
        kubeconfig: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean' },
        ...Object.fromEntries(
          settingFlags.map((s) => [s.flag, { type: 'string' as const, default: s.default }]),
        ),
      },
    }));
  } catch (e) {
    return fail(`${(e as Error).message}\n\n${USAGE(name, settingFlags)}`);
  }
  if (values.help) {
    process.stdout.write(USAGE(name, settingFlags));
    process.exit(0);
  }
  if (values.version) {
    const { readFileSync } = await import('node:fs');
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    process.stdout.write(`${name} ${pkg.version}\n`);
    process.exit(0);
  }
  const whole = (flag: string, what: string, max: number) => {
    const n = Number(values[flag]);
    if (!Number.isInteger(n) || n < 1 || n > max)
      fail(`--${flag}: "${values[flag]}" is not a whole number of ${what} from 1 to ${max}`);
    return n;
  };
  const seconds = (flag: string) => whole(flag, 'seconds', 86_400 * 7);
  const level = String(values['zap-log-level']) as LogLevel;
  if (!LOG_LEVELS.includes(level)) fail(`--zap-log-level: "${level}" is not one of ${LOG_LEVELS.join(', ')}`);
  let metricsBindAddress: BindAddress | undefined;
  let healthProbeBindAddress: BindAddress | undefined;
  try {
    metricsBindAddress = parseBindAddress(values['metrics-bind-address'] as string, '--metrics-bind-address');
    healthProbeBindAddress = parseBindAddress(
      values['health-probe-bind-address'] as string,
      '--health-probe-bind-address',
    );
  } catch (e) {
    fail((e as Error).message);
  }
  const { KubeConfig } = await import('@kubernetes/client-node');
  const { KubeClient } = await import('./client.ts');
  const kc = new KubeConfig();
  let client: InstanceType<typeof KubeClient>;
  try {
    if (values.kubeconfig) kc.loadFromFile(values.kubeconfig as string);
    else kc.loadFromDefault();
    if (!kc.getCurrentCluster()) throw new Error('no current cluster in it');
    client = new KubeClient(kc);
  } catch (e) {
    return fail(
      `cannot load the kubeconfig (${values.kubeconfig ?? process.env.KUBECONFIG ?? 'in-cluster or ~/.kube/config'}): ${(e as Error).message.split('\n')[0]}`,
    );
  }
  const controller = new PolicyController({
    client,
    kind,
    name,
    leaseNamespace:
      (values['leader-election-namespace'] as string | undefined) ??
      process.env.POD_NAMESPACE ??
      'cascade-system',
    leaseDurationSeconds: seconds('leader-elect-lease-duration'),
    resyncSeconds: seconds('resync-period'),
    writeConcurrency: whole('max-concurrent-writes', 'writes', 256),
    log: jsonLogger(name, undefined, level),
    settings: Object.fromEntries(settingFlags.map((s) => [s.key, String(values[s.flag] ?? '')])),
    ...(metricsBindAddress ? { metricsBindAddress } : {}),
    ...(healthProbeBindAddress ? { healthProbeBindAddress } : {}),
  });
  const stopTracing = setupTracing(name);
  try {
    await controller.start();
  } catch (e) {
    return fail(`cannot start: ${(e as Error).message}`);
  }
  process.on(
    'SIGTERM',
    () =>
      void controller
        .stop()
        .then(() => stopTracing?.())
        .then(() => process.exit(0)),
  );
  return controller;
}
