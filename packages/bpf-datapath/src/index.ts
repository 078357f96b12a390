// @cascade/bpf-datapath: the kernel side of network policy. See README.md. Its public surface, one
// module per line; `@cascade/bpf-datapath/layout` is the pure part (codecs, Service tables) the
// engine reads, `@cascade/bpf-datapath/testing` the kernel tests' helpers.

// where the built program and helpers are, and whether this kernel can run them
export { ARTIFACTS, kernelUnavailable } from './artifacts.ts';
// the node's CNI configuration: cascade-cni chained in at install, taken out at uninstall
export { type ChainEntry, chainCni, cniChained, unchainCni } from './cni-chain.ts';
// every map's key and value, byte for byte (bpf/cascade.h)
export {
  addr16,
  COUNTERS,
  decodeEndpointValue,
  decodePolicyKey,
  decodePolicyValue,
  EP_FLAGS,
  encodeCtKey,
  encodeCtValue,
  type FlowEvent,
  formatAddr16,
  ID,
  type PolicyKey,
  type PolicyValue,
  SIZES,
  TEST_RUN_IFINDEX,
} from './codecs.ts';
// a helper process run with bounded arguments and output
export { type Run, runCommand } from './command.ts';
// the flow cache's size, chosen at load time from a memory budget
export {
  DEFAULT_FLOW_CACHE_BYTES,
  FLOW_SLOT_BYTES,
  flowCacheBytes,
  flowCacheSlots,
  possibleCpus,
  quantityBytes,
} from './flowcache.ts';
// pods' interfaces, found from the kernel
export { FixedInterface, type InterfaceResolver, KernelInterfaces } from './interfaces.ts';
// a node's live maps, opened read-only
export { LiveMaps } from './live.ts';
// the loader: the program attached, the maps brought to a desired state
export { Datapath } from './loader.ts';
// synthetic packets for BPF_PROG_TEST_RUN
export { buildPacket, TCP_FLAGS } from './packet.ts';
// the userspace reference datapath the kernel tests compare with
export { type RefDecision, ReferenceDatapath } from './reference.ts';
// a datapath of its own in a fresh pin directory (demo, kernel tests)
export { freshDatapath } from './scratch.ts';
// the Service tables
export { encodeServices, MAX_BACKEND_SLOTS, MAX_FRONTENDS } from './services.ts';
// a node's desired state, encoded
export {
  type DesiredState,
  encodeState,
  encodeTableEntry,
  type SyncReport,
  type TableEntry,
} from './state.ts';
