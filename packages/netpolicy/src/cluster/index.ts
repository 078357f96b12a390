// Cluster state both programs read: the watch set that feeds the engine (watch.ts), which pod owns
// each address (owners.ts), and the PodAddressSlice format the controller writes and agents read
// (slices.ts), and the per-node reports agents write for the controller to relay (node-report.ts). Imports the engine only; agent/ and controller/ import this, never each other.
export * from './node-report.ts';
export * from './owners.ts';
export * from './slices.ts';
export * from './watch.ts';
