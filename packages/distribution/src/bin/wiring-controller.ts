// wiring-controller: writes each gateway's data-plane wiring (Kuadrant's wasm-shim, configured with
// every gateway policy kind's actions) as its provider's objects. See README.md.
import { watchNamespaces } from '@cascade/core';
import {
  binary,
  CONTROLLER_FLAGS,
  CONTROLLER_USAGE,
  controllerSettings,
  jsonLogger,
  KubeClient,
  runUntilSigterm,
  setupTracing,
} from '@cascade/core/kube';
import { WIRING_FLAGS, WIRING_USAGE, WiringController, wiringFlags } from '@cascade/wiring';
import { GATEWAY_POLICY_KINDS, WIRING_CONTROLLER } from '../manifest.ts';

const NAME = WIRING_CONTROLLER;
const USAGE = `Usage: ${NAME} [flags]

Flags (controller-runtime's names):
${CONTROLLER_USAGE}  --max-concurrent-writes N          API writes in flight at once (default 8)
  --watch-namespace NS[,NS...]       routes, gateways, policies and the objects written, in these
                                     namespaces only (default "": every namespace)
${WIRING_USAGE}  --version                          the version
  -h, --help                         this text
`;

const b = binary(
  NAME,
  USAGE,
  {
    ...CONTROLLER_FLAGS,
    'max-concurrent-writes': { type: 'string', default: '8' },
    'watch-namespace': { type: 'string', default: '' },
    ...WIRING_FLAGS,
  },
  new URL('../../package.json', import.meta.url),
);
const { logLevel, ...settings } = controllerSettings(b);
const watch = watchNamespaces(String(b.values['watch-namespace'] ?? ''));
if (typeof watch === 'string') b.fail(`--watch-namespace: ${watch}`);
const own = wiringFlags(b.values);
if ('error' in own) b.fail(own.error);
const { wiring, providers } = own as Exclude<typeof own, { error: string }>;
const controller = new WiringController({
  client: new KubeClient(b.kubeConfig()),
  kinds: GATEWAY_POLICY_KINDS,
  name: NAME,
  ...settings,
  writeConcurrency: b.whole('max-concurrent-writes', 'writes', 256),
  ...(Array.isArray(watch) ? { watchNamespaces: watch } : {}),
  log: jsonLogger(NAME, undefined, logLevel),
  wiring,
  providers,
});
const stopTracing = setupTracing(NAME);
await runUntilSigterm(b, controller, stopTracing);
