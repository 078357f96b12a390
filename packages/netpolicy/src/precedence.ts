// One 32-bit number orders every MapState entry; the datapath compares only this number (higher
// wins; on a tie the longer match, then deny). Layout, most significant first:
//
//   bit 31      0
//   bits 30..16 A: admin band. An AdminNetworkPolicy / ClusterNetworkPolicy(Admin) rule at evaluation
//               rank r (0 = first: lowest priority number, then ANP before CNP, then name, then rule
//               index) has A = 32767 - r. Everything else has A = 0, so any admin rule beats every
//               NetworkPolicy and baseline entry.
//   bits 15..1  L: lower band, used when A = 0 and inside a Pass (see below):
//                 32767          NetworkPolicy allow (all NP rules are equal: NP is a union)
//                 16384          NetworkPolicy isolation (deny what no NP rule allows)
//                 16383 - b      baseline rule at rank b (CNP Baseline by priority, then the BANP)
//                 0              default allow (only materialised inside a Pass)
//   bit 0       1 for deny, so that at equal precedence deny wins.
//
// Pass: an admin Pass rule at rank r hands its traffic to the lower tiers. It is lowered to copies of
// the lower-tier entries it covers, re-banded to A = 32767 - r with their own L, plus a default-allow
// entry (L = 0) for its whole key: they beat every admin rule ranked after r and keep the NP/baseline
// order among themselves.

export const MAX_ADMIN_RANK = 32766;
export const MAX_BASELINE_RANK = 16382;
export const L_NP_ALLOW = 32767;
export const L_NP_ISOLATION = 16384;
export const L_DEFAULT = 0;

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

/** Human form for explain: "admin#3", "admin#3/np-allow" (inside a Pass), "np-isolation", "baseline#2". */
export function describePrecedence(p: number): string {
  const { a, l, deny } = decodePrecedence(p);
  const lower =
    l === L_NP_ALLOW
      ? 'np-allow'
      : l === L_NP_ISOLATION
        ? 'np-isolation'
        : l === L_DEFAULT
          ? 'default'
          : `baseline#${16383 - l}`;
  const verdict = deny ? 'deny' : 'allow';
  if (a === 0) return `${lower} ${verdict}`;
  return l === 0 ? `admin#${32767 - a} ${verdict}` : `admin#${32767 - a}/${lower} ${verdict}`;
}
