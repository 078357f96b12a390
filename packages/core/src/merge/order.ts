// Precedence between policies that reach one path (GEP-713). "Established" wins ties of strategy:
// a less specific attachment level is more established; at one level the older policy
// (creationTimestamp, or order of appearance when a manifest has none) is; then namespace/name
// in alphabetical order. Timestamps are compared before appearance so that, in a cluster, the
// informer's delivery order never changes a result.
import type { Level } from '../topology/types.ts';
import type { NormalizedPolicy } from './policy.ts';

export interface ChainLink {
  policy: NormalizedPolicy;
  /** The level through which the policy reaches the path. */
  level: Level;
}

/** < 0 when `a` is more established than `b` at the same level. */
export function compareAge(a: NormalizedPolicy, b: NormalizedPolicy): number {
  const ta = a.createdAt ?? Number.POSITIVE_INFINITY;
  const tb = b.createdAt ?? Number.POSITIVE_INFINITY;
  if (ta !== tb) return ta < tb ? -1 : 1;
  if (a.createdAt === undefined && b.createdAt === undefined && a.sequence !== b.sequence) {
    return a.sequence - b.sequence;
  }
  const na = `${a.ref.namespace}/${a.ref.name}`;
  const nb = `${b.ref.namespace}/${b.ref.name}`;
  return na < nb ? -1 : na > nb ? 1 : 0;
}

/** < 0 when `a` is more established than `b`. */
export function compareEstablished(a: ChainLink, b: ChainLink): number {
  if (a.level !== b.level) return a.level - b.level;
  return compareAge(a.policy, b.policy);
}

/** Sorts links in fold order: least established (most specific, newest) first. */
export function foldOrder(links: ChainLink[]): ChainLink[] {
  return links.sort((a, b) => compareEstablished(b, a));
}
