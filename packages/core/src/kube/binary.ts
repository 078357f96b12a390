// The edge every binary shares (the gateway controllers, the netpolicy-controller, the node agent):
// flags parsed with node:util, --help and --version, and every bad value as one line on stderr and
// exit 2, never a stack trace.
import { readFileSync } from 'node:fs';
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { type BindAddress, parseBindAddress } from './health.ts';
import { LOG_LEVELS, type LogLevel } from './logging.ts';

export type FlagValues = Record<string, string | boolean | undefined>;

export interface Binary {
  values: FlagValues;
  /** One line on stderr, exit 2. */
  fail(msg: string): never;
  /** A whole number from 1 to max. */
  whole(flag: string, what: string, max: number): number;
  seconds(flag: string): number;
  /** --zap-log-level. */
  logLevel(flag?: string): LogLevel;
  /** A controller-runtime bind address (undefined: "0", disabled). */
  bindAddress(flag: string): BindAddress | undefined;
  /** --kubeconfig, else in-cluster, $KUBECONFIG, ~/.kube/config. */
  kubeConfig(flag?: string): KubeConfig;
  /** The version of the binary's package (what --version prints). */
  version(): string;
}

/**
 * Parses argv for a binary: `--help` prints `usage` and exits 0, `--version` prints the version of
 * the package.json at `packageJson` and exits 0, an unknown flag prints the usage and exits 2.
 */
export function binary(
  name: string,
  usage: string,
  options: NonNullable<ParseArgsConfig['options']>,
  packageJson: URL,
  argv: string[] = process.argv.slice(2),
): Binary {
  const fail = (msg: string): never => {
    process.stderr.write(`${name}: ${msg}\n`);
    process.exit(2);
  };
  let values: FlagValues = {};
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { ...options, help: { type: 'boolean', short: 'h' }, version: { type: 'boolean' } },
    }));
  } catch (e) {
    fail(`${(e as Error).message}\n\n${usage}`);
  }
  if (values.help) {
    process.stdout.write(usage);
    process.exit(0);
  }
  const version = () => (JSON.parse(readFileSync(packageJson, 'utf8')) as { version: string }).version;
  if (values.version) {
    process.stdout.write(`${name} ${version()}\n`);
    process.exit(0);
  }
  const whole = (flag: string, what: string, max: number) => {
    const n = Number(values[flag]);
    if (!Number.isInteger(n) || n < 1 || n > max)
      fail(`--${flag}: "${values[flag]}" is not a whole number of ${what} from 1 to ${max}`);
    return n;
  };
  return {
    values,
    fail,
    whole,
    seconds: (flag) => whole(flag, 'seconds', 7 * 86_400),
    logLevel: (flag = 'zap-log-level') => {
      const level = String(values[flag]) as LogLevel;
      if (!LOG_LEVELS.includes(level)) fail(`--${flag}: "${level}" is not one of ${LOG_LEVELS.join(', ')}`);
      return level;
    },
    bindAddress: (flag) => {
      try {
        return parseBindAddress(String(values[flag]), `--${flag}`);
      } catch (e) {
        return fail((e as Error).message);
      }
    },
    kubeConfig: (flag = 'kubeconfig') => {
      const kc = new KubeConfig();
      try {
        if (values[flag]) kc.loadFromFile(String(values[flag]));
        else kc.loadFromDefault();
        if (!kc.getCurrentCluster()) throw new Error('no current cluster in it');
      } catch (e) {
        fail(
          `cannot load the kubeconfig (${values[flag] ?? process.env.KUBECONFIG ?? 'in-cluster or ~/.kube/config'}): ${(e as Error).message.split('\n')[0]}`,
        );
      }
      return kc;
    },
    version,
  };
}

/** The flags every controller takes (controller-runtime's names), and their usage lines. */
export const CONTROLLER_FLAGS: NonNullable<ParseArgsConfig['options']> = {
  'metrics-bind-address': { type: 'string', default: ':8080' },
  'health-probe-bind-address': { type: 'string', default: ':8081' },
  'leader-elect-lease-duration': { type: 'string', default: '15' },
  'leader-election-namespace': { type: 'string' },
  'resync-period': { type: 'string', default: '600' },
  'zap-log-level': { type: 'string', default: 'info' },
  kubeconfig: { type: 'string' },
};

export const CONTROLLER_USAGE = `  --metrics-bind-address ADDR        /metrics (default ":8080"; "0" disables)
  --health-probe-bind-address ADDR   /healthz and /readyz (default ":8081")
  --leader-elect-lease-duration S    lease duration in seconds (default 15)
  --leader-election-namespace NS     namespace of the Lease (default $POD_NAMESPACE or cascade-system)
  --resync-period S                  full reconcile at least this often (default 600)
  --zap-log-level LEVEL              debug|info|warn|error: the least severe level logged (default info)
  --kubeconfig PATH                  kubeconfig (default: in-cluster, then $KUBECONFIG, ~/.kube/config)
`;

/** The controller settings every controller binary reads from CONTROLLER_FLAGS. */
export function controllerSettings(b: Binary) {
  const metricsBindAddress = b.bindAddress('metrics-bind-address');
  const healthProbeBindAddress = b.bindAddress('health-probe-bind-address');
  return {
    leaseNamespace:
      (b.values['leader-election-namespace'] as string | undefined) ??
      process.env.POD_NAMESPACE ??
      'cascade-system',
    leaseDurationSeconds: b.seconds('leader-elect-lease-duration'),
    resyncSeconds: b.seconds('resync-period'),
    logLevel: b.logLevel(),
    ...(metricsBindAddress ? { metricsBindAddress } : {}),
    ...(healthProbeBindAddress ? { healthProbeBindAddress } : {}),
  };
}

/**
 * Starts a controller (exit 2 naming why when it cannot), then on SIGTERM stops it, flushes tracing
 * when given, and exits 0.
 */
export async function runUntilSigterm(
  b: Pick<Binary, 'fail'>,
  controller: { start(): Promise<void>; stop(): Promise<void> },
  stopTracing?: () => unknown,
): Promise<void> {
  try {
    await controller.start();
  } catch (e) {
    b.fail(`cannot start: ${(e as Error).message}`);
  }
  process.on(
    'SIGTERM',
    () =>
      void controller
        .stop()
        .then(() => stopTracing?.())
        .then(() => process.exit(0)),
  );
}
