// @cascade/netpolicy: network policy resolution and lowering. See README.md.
export * from './agent.ts';
export * from './cidr.ts';
export * from './datapath.ts';
export * from './engine.ts';
export * from './evaluate.ts';
export * from './identities.ts';
export * from './lint.ts';
export * from './lower.ts';
export * from './mapstate.ts';
export * from './model.ts';
export * from './ports.ts';
export * from './precedence.ts';
export * from './rules.ts';
export * from './selection.ts';
export * from './tiers.ts';
export * from './verdict.ts';
