// netpolicy-controller: flags (controller-runtime's names, as the gateway controllers), kubeconfig,
// the controller, SIGTERM. A bad flag or kubeconfig is one line on stderr and exit 2.

import {
  binary,
  CONTROLLER_FLAGS,
  CONTROLLER_USAGE,
  controllerSettings,
  jsonLogger,
  KubeClient,
  runUntilSigterm,
} from '@cascade/core/kube';
import { DEFAULT_TENANT_LABEL, validTenantLabel } from '../engine/tenants.ts';
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
  --foreign-identity-cap N           the agents' --foreign-identity-cap (default 512): published
                                     rules and simulations must be theirs
  --tenant-label KEY                 the agents' --tenant-label (default cascade.dev/tenant)
  --slice-updates-batch-period D     pod changes wait D (e.g. 500ms, 1s; at most 10s) to be written
                                     to PodAddressSlices with those that follow: fewer writes and
                                     agent watch events in rollouts, new addresses that much later
                                     on other nodes (default 0: at once)
  --version                          the version
  -h, --help                         this text
`;

/** The --tenant-label value, checked. */
function tenantLabelFlag(v: string): string {
  return validTenantLabel(v) ? v : b.fail(`--tenant-label: "${v.slice(0, 80)}" is not a label key`);
}

/** `0`, `500ms`, `1s`, `1.5s` (at most 10 s) in milliseconds; anything else is a usage error. */
function batchPeriod(v: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s)$/.exec(v);
  const ms = v === '0' ? 0 : m ? Number(m[1]) * (m[2] === 's' ? 1000 : 1) : Number.NaN;
  if (!(ms >= 0 && ms <= 10_000))
    return b.fail(`--slice-updates-batch-period: "${v}" is not a duration from 0 to 10s (like 500ms or 1s)`);
  return Math.round(ms);
}

const b = binary(
  CONTROLLER_NAME,
  USAGE,
  {
    ...CONTROLLER_FLAGS,
    'rules-analysis-interval': { type: 'string', default: '30' },
    'namespace-entry-budget': { type: 'string', default: '100000' },
    'foreign-identity-cap': { type: 'string', default: '512' },
    'tenant-label': { type: 'string', default: DEFAULT_TENANT_LABEL },
    'slice-updates-batch-period': { type: 'string', default: '0' },
  },
  new URL('../../package.json', import.meta.url),
);
const { logLevel, ...settings } = controllerSettings(b);
// every flag checked before the kubeconfig is read: a bad value is the error reported
const own = {
  analysisIntervalSeconds: b.seconds('rules-analysis-interval'),
  entryBudget: b.whole('namespace-entry-budget', 'entries', 1_048_576),
  foreignIdentityCap: b.whole('foreign-identity-cap', 'label sets', 1_000_000),
  tenantLabel: tenantLabelFlag(String(b.values['tenant-label'])),
  sliceBatchMillis: batchPeriod(String(b.values['slice-updates-batch-period'])),
};
const controller = new NetpolController({
  client: new KubeClient(b.kubeConfig()),
  ...settings,
  ...own,
  log: jsonLogger(CONTROLLER_NAME, undefined, logLevel),
});
await runUntilSigterm(b, controller);
