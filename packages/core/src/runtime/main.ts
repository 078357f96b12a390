// A controller binary's main: flags (controller-runtime's names where one exists), kubeconfig, the
// controller, SIGTERM. Split from controller.ts: this is the edge that reads argv and the process.
import type { PolicyKind } from '../kind.ts';
import { binary, CONTROLLER_FLAGS, CONTROLLER_USAGE, controllerSettings } from './binary.ts';
import { KubeClient } from './client.ts';
import { PolicyController } from './controller.ts';
import { jsonLogger } from './metrics.ts';
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
${CONTROLLER_USAGE}  --max-concurrent-writes N          API writes in flight at once within a reconcile (default 8)
${extra.map((s) => `  --${`${s.flag} VALUE`.padEnd(33)}${s.help} (default "${s.default}")\n`).join('')}  --version                          the version
  -h, --help                         this text
`;

/** A controller binary's main: flags, kubeconfig, the controller, SIGTERM. Exits 2 on bad input. */
export async function runPolicyController(
  kind: PolicyKind,
  name: string,
  settingFlags: readonly SettingFlag[] = [],
): Promise<PolicyController> {
  const b = binary(
    name,
    USAGE(name, settingFlags),
    {
      ...CONTROLLER_FLAGS,
      'max-concurrent-writes': { type: 'string', default: '8' },
      ...Object.fromEntries(
        settingFlags.map((s) => [s.flag, { type: 'string' as const, default: s.default }]),
      ),
    },
    new URL('../../package.json', import.meta.url),
  );
  const { logLevel, ...settings } = controllerSettings(b);
  const controller = new PolicyController({
    client: new KubeClient(b.kubeConfig()),
    kind,
    name,
    ...settings,
    writeConcurrency: b.whole('max-concurrent-writes', 'writes', 256),
    log: jsonLogger(name, undefined, logLevel),
    settings: Object.fromEntries(settingFlags.map((s) => [s.key, String(b.values[s.flag] ?? '')])),
  });
  const stopTracing = setupTracing(name);
  try {
    await controller.start();
  } catch (e) {
    return b.fail(`cannot start: ${(e as Error).message}`);
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
