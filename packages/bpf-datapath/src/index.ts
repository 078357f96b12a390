// @cascade/bpf-datapath: the kernel side of network policy. See README.md.
export * from './artifacts.ts';
export * from './bpfctl.ts';
export * from './codecs.ts';
export * from './command.ts';
export * from './interfaces.ts';
export * from './kernel.ts';
export * from './live.ts';
export * from './loader.ts';
export * from './packet.ts';
export * from './reference.ts';
export * from './scratch.ts';
export * from './services.ts';
export * from './state.ts';
