// Policy kinds by any name people type, as kubectl accepts them: the kind, its plural, its short
// names (the CRDs', from the distribution's manifest: authpol, rlp, netpol/np, anp, banp, cnp), in
// any case. `ap` stays as an alias of AuthPolicy (cascadectl accepted it before the CRD's `authpol`).
import { POLICY_KIND_NAMES } from '@cascade/distribution';
import { UsageError } from './cli.ts';

const side = (s: 'gateway' | 'network') => POLICY_KIND_NAMES.filter((k) => k.side === s).map((k) => k.kind);
export const GATEWAY_KINDS: readonly string[] = side('gateway');
export const NETPOL_KINDS: readonly string[] = side('network');
/** A policy kind's name (`AuthPolicy`, `NetworkPolicy`...). */
export type PolicyKindName = string;

const SHORT = new Map(POLICY_KIND_NAMES.map((k) => [k.kind, k.shortNames[0] ?? k.kind.toLowerCase()]));
/** Aliases kept for scripts written before the manifest gave each kind its CRD's short names. */
const LEGACY: Record<string, string> = { ap: 'AuthPolicy', aps: 'AuthPolicy' };

const ALIASES = new Map<string, PolicyKindName>(Object.entries(LEGACY));
for (const k of POLICY_KIND_NAMES) {
  const lower = k.kind.toLowerCase();
  for (const a of [lower, k.plural, ...k.shortNames, ...k.shortNames.map((n) => `${n}s`)])
    ALIASES.set(a, k.kind);
}

/** The kind a name means (any case, plural, short), or undefined. */
export const kindByName = (name: string): PolicyKindName | undefined => ALIASES.get(name.toLowerCase());

/** `authpol (AuthPolicy), rlp (RateLimitPolicy)`: the accepted names of some kinds, for messages. */
export const kindNames = (kinds: readonly PolicyKindName[]): string =>
  kinds.map((k) => `${SHORT.get(k)} (${k})`).join(', ');

/**
 * The --kind option of a command that covers `allowed` kinds: undefined when absent; a UsageError
 * naming the accepted names for an unknown name, and saying which command covers a known kind that
 * this one does not.
 */
export function resolveKind(value: unknown, allowed: readonly PolicyKindName[]): PolicyKindName | undefined {
  if (value === undefined) return undefined;
  const kind = kindByName(String(value));
  if (!kind)
    throw new UsageError(
      `--kind "${String(value)}" is not a policy kind; one of ${kindNames(allowed)} (any case, plural too)`,
    );
  if (!allowed.includes(kind)) {
    const elsewhere = NETPOL_KINDS.includes(kind)
      ? '`cascadectl netpol ...` and `cascadectl lint` cover network policy'
      : '`cascadectl effective|status|explain` cover gateway policies';
    throw new UsageError(`--kind ${kind} is not covered here (${kindNames(allowed)}); ${elsewhere}`);
  }
  return kind;
}
