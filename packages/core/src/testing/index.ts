// core's testing module (`@cascade/core/testing`): test kinds and a standard topology for unit tests
// (kinds.ts), and the one envtest set-up every integration test uses (envtest.ts). Not used by
// production code (the walls test checks it).

// the envtest set-up: a client, a controller with test settings, fixtures, example files
export {
  apiPath,
  clientOf,
  createGateway,
  createGatewayClass,
  createNamespace,
  createObjects,
  createRoute,
  newController,
  readObjects,
  startController,
  type TestApiServer,
} from './envtest.ts';
// test kinds, a policy builder and a standard topology for unit tests
export { L, policy, standardEngine, standardTopology, testAuthKind, testLimitKind } from './kinds.ts';
// a script run as a child process (a CLI test's process)
export { runScript, type ScriptResult } from './run-script.ts';
