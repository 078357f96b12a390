// netpolicy-controller: flags (controller-runtime's names, as the gateway controllers), kubeconfig,
// the controller, SIGTERM. A bad flag or kubeconfig is one line on stderr and exit 2.
import { parseArgs } from 'node:util';
import { jsonLogger, KubeClient, LOG_LEVELS, type LogLevel, parseBindAddress } from '@cascade/core';
import { KubeConfig } from '@kubernetes/client-node';
import { NetpolController } from './controller.ts';
import { CONTROLLER_NAME } from './rbac.ts';

const USAGE = `Usage: ${CONTROLLER_NAME} [flags]

Publishes an EffectivePolicy (policyKind Network) per namespace and pod label set, and status
conditions on AdminNetworkPolicies, BaselineAdminNetworkPolicies and ClusterNetworkPolicies.

Flags (controller-runtime's names):
  --metrics-bind-address ADDR        /metrics (default ":8080"; "0" disables)
  --health-probe-bind-address ADDR   /healthz and /readyz (default ":8081")
  --leader-elect-lease-duration S    lease duration in seconds (default 15)
  --leader-election-namespace NS     namespace of the Lease (default $POD_NAMESPACE or cascade-system)
  --resync-period S                  full reconcile at least this often (default 600)
  --zap-log-level LEVEL              debug|info|warn|error (default info)
  --kubeconfig PATH                  kubeconfig (default: in-cluster, then $KUBECONFIG, ~/.kube/config)
  --version                          the version
  -h, --help                         this text
`;

const fail = (msg: string): never => {
  process.stderr.write(`${CONTROLLER_NAME}: ${msg}\n`);
  process.exit(2);
};
let values: Record<string, string | boolean | undefined> = {};
try {
  ({ values } = parseArgs({
    options: {
      'metrics-bind-address': { type: 'string', default: ':8080' },
      'health-probe-bind-address': { type: 'string', default: ':8081' },
      'leader-elect-lease-duration': { type: 'string', default: '15' },
      'leader-election-namespace': { type: 'string' },
      'resync-period': { type: 'string', default: '600' },
      'zap-log-level': { type: 'string', default: 'info' },
      kubeconfig: { type: 'string' },
      version: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  }));
} catch (e) {
  fail(`${(e as Error).message}\n\n${USAGE}`);
}
if (values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
if (values.version) {
  const { readFileSync } = await import('node:fs');
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  process.stdout.write(`${CONTROLLER_NAME} ${pkg.version}\n`);
  process.exit(0);
}
const seconds = (flag: string) => {
  const n = Number(values[flag]);
  if (!Number.isInteger(n) || n < 1 || n > 7 * 86_400)
    fail(`--${flag}: "${values[flag]}" is not a whole number of seconds from 1 to 604800`);
  return n;
};
const level = String(values['zap-log-level']) as LogLevel;
if (!LOG_LEVELS.includes(level)) fail(`--zap-log-level: "${level}" is not one of ${LOG_LEVELS.join(', ')}`);
let metrics: ReturnType<typeof parseBindAddress>;
let probes: ReturnType<typeof parseBindAddress>;
try {
  metrics = parseBindAddress(String(values['metrics-bind-address']), '--metrics-bind-address');
  probes = parseBindAddress(String(values['health-probe-bind-address']), '--health-probe-bind-address');
} catch (e) {
  fail((e as Error).message);
}
const kc = new KubeConfig();
try {
  if (values.kubeconfig) kc.loadFromFile(String(values.kubeconfig));
  else kc.loadFromDefault();
  if (!kc.getCurrentCluster()) throw new Error('no current cluster in it');
} catch (e) {
  fail(
    `cannot load the kubeconfig (${values.kubeconfig ?? process.env.KUBECONFIG ?? 'in-cluster or ~/.kube/config'}): ${(e as Error).message.split('\n')[0]}`,
  );
}
const controller = new NetpolController({
  client: new KubeClient(kc),
  leaseNamespace:
    (values['leader-election-namespace'] as string | undefined) ??
    process.env.POD_NAMESPACE ??
    'cascade-system',
  leaseDurationSeconds: seconds('leader-elect-lease-duration'),
  resyncSeconds: seconds('resync-period'),
  log: jsonLogger(CONTROLLER_NAME, undefined, level),
  ...(metrics ? { metricsBindAddress: metrics } : {}),
  ...(probes ? { healthProbeBindAddress: probes } : {}),
});
try {
  await controller.start();
} catch (e) {
  fail(`cannot start: ${(e as Error).message}`);
}
process.on('SIGTERM', () => void controller.stop().then(() => process.exit(0)));
