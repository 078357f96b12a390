// The node agent (binary: main.ts): watches through cluster/, resolves with the engine, writes the
// node's BPF maps through bpf-datapath's loader (datapath.ts), and reports flows (flows.ts). Imports
// engine/ and cluster/, never controller/.
export * from './agent.ts';
export * from './datapath.ts';
export * from './flows.ts';
export * from './options.ts';
export * from './rbac.ts';
