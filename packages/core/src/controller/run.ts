// A controller binary's main: flags (controller-runtime's names where one exists), kubeconfig, the
// controller, SIGTERM. Split from controller.ts: this is the edge that reads argv and the process.
import type { PolicyKind } from '../kind.ts';
import {
  binary,
  CONTROLLER_FLAGS,
  CONTROLLER_USAGE,
  controllerSettings,
  runUntilSigterm,
} from '../kube/binary.ts';
import { KubeClient } from '../kube/client.ts';
import { jsonLogger } from '../kube/logging.ts';
import { setupTracing } from '../kube/tracing.ts';
import { PolicyController } from './controller.ts';
import type { DataPlaneSource } from './data-plane.ts';

/** A kind's own setting as a flag of its binary (e.g. the namespace its component reads). */
export interface SettingFlag {
  flag: string;
  key: string;
  default: string;
  help: string;
}

const USAGE = (name: string, extra: readonly SettingFlag[] = []) => `Usage: ${name} [flags]

Flags (controller-runtime's names):
${CONTROLLER_USAGE}  --max-concurrent-writes N          API writes in flight at once within a reconcile (default 8)
  --watch-namespace NS[,NS...]       policies, routes, gateways, ReferenceGrants and what the controller
                                     publishes, in these namespaces only (default "": every namespace)
  --require-wiring true|false        Enforced only where the wiring-controller has wired the gateway's
                                     data plane (default true; false without a wiring-controller)
  --require-ready true|false         Enforced only where each gateway reached is Accepted and Programmed
                                     by its controller and each object carrying the policy is served and
                                     reported ready by its consumer (default true)
${extra.map((s) => `  --${`${s.flag} VALUE`.padEnd(33)}${s.help} (default "${s.default}")\n`).join('')}  --version                          the version
  -h, --help                         this text
`;

/**
 * --watch-namespace's value: undefined for every namespace (empty), else the namespaces (operator-sdk's
 * WATCH_NAMESPACE form, comma-separated), or what is wrong with it.
 */
export function watchNamespaces(text: string): string[] | undefined | string {
  const list = text
    .split(',')
    .map((n) => n.trim())
    .filter(Boolean);
  if (list.length === 0) return undefined;
  if (list.length > 1000)
    return `${list.length} namespaces; at most 1000 (leave it empty for every namespace)`;
  const bad = list.find((n) => n.length > 63 || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(n));
  if (bad !== undefined) return `"${bad.slice(0, 70)}" is not a namespace name (a DNS label)`;
  return [...new Set(list)];
}

/** A controller binary's main: flags, kubeconfig, the controller, SIGTERM. Exits 2 on bad input. */
export async function runPolicyController(
  kind: PolicyKind,
  name: string,
  settingFlags: readonly SettingFlag[] = [],
  dataPlane?: DataPlaneSource,
): Promise<PolicyController> {
  const b = binary(
    name,
    USAGE(name, settingFlags),
    {
      ...CONTROLLER_FLAGS,
      'max-concurrent-writes': { type: 'string', default: '8' },
      'watch-namespace': { type: 'string', default: '' },
      'require-wiring': { type: 'string', default: 'true' },
      'require-ready': { type: 'string', default: 'true' },
      ...Object.fromEntries(
        settingFlags.map((s) => [s.flag, { type: 'string' as const, default: s.default }]),
      ),
    },
    new URL('../../package.json', import.meta.url),
  );
  const { logLevel, ...settings } = controllerSettings(b);
  const watch = watchNamespaces(String(b.values['watch-namespace'] ?? ''));
  if (typeof watch === 'string') return b.fail(`--watch-namespace: ${watch}`);
  const bool = (flag: string): boolean => {
    const v = String(b.values[flag]);
    if (v === 'true' || v === 'false') return v === 'true';
    return b.fail(`--${flag}: "${v.slice(0, 40)}" is not true or false`);
  };
  const requireWiring = bool('require-wiring');
  const requireReady = bool('require-ready');
  const controller = new PolicyController({
    client: new KubeClient(b.kubeConfig()),
    kind,
    name,
    ...settings,
    writeConcurrency: b.whole('max-concurrent-writes', 'writes', 256),
    ...(watch ? { watchNamespaces: watch } : {}),
    requireWiring,
    ...(dataPlane ? { dataPlane } : {}),
    requireReady,
    log: jsonLogger(name, undefined, logLevel),
    settings: Object.fromEntries(settingFlags.map((s) => [s.key, String(b.values[s.flag] ?? '')])),
  });
  const stopTracing = setupTracing(name);
  await runUntilSigterm(b, controller, stopTracing);
  return controller;
}
