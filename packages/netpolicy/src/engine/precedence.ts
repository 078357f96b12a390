// One 32-bit number orders every MapState entry; the datapath compares only this number (higher
// wins; on a tie the longer match, then deny). Layout, most significant first:
//
//   bit 31      0
//   bits 30..16 A: admin band. An AdminNetworkPolicy / ClusterNetworkPolicy(Admin) rule at evaluation
//               rank r among the admin rules that apply to the endpoint (0 = first: lowest priority
//               number, then ANP before CNP, then name, then rule index) has A = 32767 - r. Entries of
//               the lower layer have A = 0.
//   bits 15..1  L: lower band (lower layer only):
//                 32767          NetworkPolicy allow (all NP rules are equal: NP is a union)
//                 16384          NetworkPolicy isolation (deny what no NP rule allows)
//                 16383 - b      baseline rule at rank b (CNP Baseline by priority, then the BANP)
//   bit 0       1 for deny, so that at equal precedence deny wins.
//
// Two layers per endpoint direction: the admin layer (admin rules, Pass rules as "pass" entries) and
// the lower layer (NetworkPolicy where one governs the endpoint, else the baseline). The datapath
// takes the admin layer's answer unless it is pass or missing, then the lower layer's, then allows.

import { L_NP_ISOLATION } from '@cascade/bpf-datapath/layout';

export const MAX_ADMIN_RANK = 32766;
export const MAX_BASELINE_RANK = 16382;
export const L_NP_ALLOW = 32767;
/**
 * The datapath's own constant (it ignores entries from this band up for the pod's own node): one
 * value for the lowering and the kernel.
 */
export { L_NP_ISOLATION };

export function adminBand(rank: number): number {
  if (rank < 0 || rank > MAX_ADMIN_RANK)
    throw new RangeError(`admin rank ${rank} outside 0..${MAX_ADMIN_RANK}`);
  return 32767 - rank;
}

export function baselineL(rank: number): number {
  if (rank < 0 || rank > MAX_BASELINE_RANK)
    throw new RangeError(`baseline rank ${rank} outside 0..${MAX_BASELINE_RANK}`);
  return 16383 - rank;
}

export function encodePrecedence(a: number, l: number, deny: boolean): number {
  return ((a << 16) | (l << 1) | (deny ? 1 : 0)) >>> 0;
}

export function decodePrecedence(p: number): { a: number; l: number; deny: boolean } {
  return { a: (p >>> 16) & 0x7fff, l: (p >>> 1) & 0x7fff, deny: (p & 1) === 1 };
}

/** Human form for explain: "admin#3 deny", "np-allow allow", "np-isolation deny", "baseline#2 deny". */
export function describePrecedence(p: number): string {
  const { a, l, deny } = decodePrecedence(p);
  const verdict = deny ? 'deny' : 'allow';
  if (a > 0) return `admin#${32767 - a}`;
  const lower =
    l === L_NP_ALLOW ? 'np-allow' : l === L_NP_ISOLATION ? 'np-isolation' : `baseline#${16383 - l}`;
  return `${lower} ${verdict}`;
}
