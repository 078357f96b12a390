// The flow cache's size (bpf/flowcache.h): a per-CPU array, so its memory is slots x 56 bytes x the
// CPUs the kernel may bring online. Chosen at load time from a memory budget: the largest power of
// two of slots per CPU that fits, at most the 16,384 a node needs (a busy node's established flows
// per CPU in one 10-second tick), at least 256. A 2-CPU node keeps 16,384 slots (1.8 MiB); a 96-CPU
// node with the default 16 MiB gets 2,048 slots per CPU (10.5 MiB) instead of 84 MiB.
import { readFileSync } from 'node:fs';

/** Bytes of one slot (struct flow_slot). */
export const FLOW_SLOT_BYTES = 56;
export const MIN_FLOW_SLOTS = 256;
export const MAX_FLOW_SLOTS = 16_384;
/** The agent's default budget (--flow-cache-memory). */
export const DEFAULT_FLOW_CACHE_BYTES = 16 * 1024 * 1024;

/** Slots per CPU for a budget: the largest power of two within it, from 256 to 16,384. */
export function flowCacheSlots(budgetBytes: number, cpus: number): number {
  let slots = MAX_FLOW_SLOTS;
  while (slots > MIN_FLOW_SLOTS && slots * FLOW_SLOT_BYTES * Math.max(1, cpus) > budgetBytes) slots /= 2;
  return slots;
}

/** The flow cache's memory: slots x slot size x CPUs. */
export const flowCacheBytes = (slots: number, cpus: number) => slots * FLOW_SLOT_BYTES * cpus;

/**
 * The CPUs a per-CPU map is allocated for: the kernel's possible CPUs (/sys/devices/system/cpu/possible,
 * e.g. `0-95` or `0,2-3`), which may exceed the online ones.
 */
export function possibleCpus(file = '/sys/devices/system/cpu/possible'): number {
  const text = readFileSync(file, 'utf8').trim();
  let n = 0;
  for (const part of text.split(',')) {
    const [a, b] = part.split('-').map(Number);
    if (!Number.isInteger(a)) throw new Error(`${file}: "${text}" is not a CPU list`);
    n += b === undefined ? 1 : b! - a! + 1;
  }
  return n;
}

/** A size as Kubernetes writes one: bytes, or with Ki, Mi, Gi (undefined: not such a size). */
export function quantityBytes(text: string): number | undefined {
  const m = /^([0-9]{1,12})(Ki|Mi|Gi)?$/.exec(text.trim());
  if (!m) return undefined;
  return Number(m[1]) * (m[2] === 'Gi' ? 1 << 30 : m[2] === 'Mi' ? 1 << 20 : m[2] === 'Ki' ? 1 << 10 : 1);
}
