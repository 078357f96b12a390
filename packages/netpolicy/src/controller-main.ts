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
${CONTROLLER_USAGE}  --version                          the version
  -h, --help                         this text
`;

const b = binary(CONTROLLER_NAME, USAGE, CONTROLLER_FLAGS, new URL('../package.json', import.meta.url));
const { logLevel, ...settings } = controllerSettings(b);
const controller = new NetpolController({
  client: new KubeClient(b.kubeConfig()),
  ...settings,
  log: jsonLogger(CONTROLLER_NAME, undefined, logLevel),
});
try {
  await controller.start();
} catch (e) {
  b.fail(`cannot start: ${(e as Error).message}`);
}
process.on('SIGTERM', () => void controller.stop().then(() => process.exit(0)));
