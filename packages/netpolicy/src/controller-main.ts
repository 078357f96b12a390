// netpolicy-controller: flags (controller-runtime's names, as the gateway controllers), kubeconfig,
// the controller, SIGTERM. A bad flag or kubeconfig is one line on stderr and exit 2.
import {
  binary,
  CONTROLLER_FLAGS,
  CONTROLLER_USAGE,
  controllerSettings,
  jsonLogger,
  KubeClient,
} from '@cascade/core';
import { NetpolController } from './controller.ts';
import { CONTROLLER_NAME } from './rbac.ts';

const USAGE = `Usage: ${CONTROLLER_NAME} [flags]

Publishes an EffectivePolicy (policyKind Network) per namespace and pod label set, and status
conditions on AdminNetworkPolicies, BaselineAdminNetworkPolicies and ClusterNetworkPolicies.

Flags (controller-runtime's names):
${CONTROLLER_USAGE}  --rules-analysis-interval S        on pod churn, the exact dead-rule and entry-budget analysis
                                     runs at most this often (default 30; a policy change runs it
                                     at once)
  --namespace-entry-budget N         the agents' --namespace-entry-budget, for the budget findings
                                     (default 100000)
  --version                          the version
  -h, --help                         this text
`;

const b = binary(
  CONTROLLER_NAME,
  USAGE,
  {
    ...CONTROLLER_FLAGS,
    'rules-analysis-interval': { type: 'string', default: '30' },
    'namespace-entry-budget': { type: 'string', default: '100000' },
  },
  new URL('../package.json', import.meta.url),
);
const { logLevel, ...settings } = controllerSettings(b);
const controller = new NetpolController({
  client: new KubeClient(b.kubeConfig()),
  ...settings,
  analysisIntervalSeconds: b.seconds('rules-analysis-interval'),
  entryBudget: b.whole('namespace-entry-budget', 'entries', 1_048_576),
  log: jsonLogger(CONTROLLER_NAME, undefined, logLevel),
});
try {
  await controller.start();
} catch (e) {
  b.fail(`cannot start: ${(e as Error).message}`);
}
process.on('SIGTERM', () => void controller.stop().then(() => process.exit(0)));
