// @cascade/netpolicy: network policy resolution and lowering, the node agent and the netpolicy-controller.
// Three rooms and a shared hall (see README.md): engine/ (pure), cluster/ (cluster state both programs
// read), agent/ and controller/.
export * from './agent/index.ts';
export * from './cluster/index.ts';
export * from './controller/index.ts';
export * from './engine/index.ts';
