// core's testing module (`@cascade/core/testing`): test kinds and a standard topology for unit tests
// (kinds.ts), and the one envtest set-up every integration test uses (envtest.ts). Not used by
// production code.
export * from './envtest.ts';
export * from './kinds.ts';
export * from './run-script.ts';
