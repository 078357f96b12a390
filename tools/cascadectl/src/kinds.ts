// Policy kinds by any name people type, as kubectl accepts them: the kind, its plural, its short
// name, in any case (rlp, ap, np, anp, banp, cnp).
import { UsageError } from './cli.ts';

export const GATEWAY_KINDS = ['AuthPolicy', 'RateLimitPolicy'] as const;
export const NETPOL_KINDS = [
  'NetworkPolicy',
  'AdminNetworkPolicy',
  'BaselineAdminNetworkPolicy',
  'ClusterNetworkPolicy',
] as const;
export type PolicyKindName = (typeof GATEWAY_KINDS)[number] | (typeof NETPOL_KINDS)[number];

const SHORT: Record<PolicyKindName, string> = {
  AuthPolicy: 'ap',
  RateLimitPolicy: 'rlp',
  NetworkPolicy: 'np',
  AdminNetworkPolicy: 'anp',
  BaselineAdminNetworkPolicy: 'banp',
  ClusterNetworkPolicy: 'cnp',
};

const ALIASES = new Map<string, PolicyKindName>();
for (const [kind, short] of Object.entries(SHORT) as [PolicyKindName, string][]) {
  const k = kind.toLowerCase();
  for (const a of [k, `${k.slice(0, -1)}ies`, short, `${short}s`]) ALIASES.set(a, kind);
}
ALIASES.set('netpol', 'NetworkPolicy');
ALIASES.set('networkpolicies', 'NetworkPolicy');

/** The kind a name means (any case, plural, short), or undefined. */
export const kindByName = (name: string): PolicyKindName | undefined => ALIASES.get(name.toLowerCase());

/** `ap (AuthPolicy), rlp (RateLimitPolicy)`: the accepted names of some kinds, for messages. */
export const kindNames = (kinds: readonly PolicyKindName[]): string =>
  kinds.map((k) => `${SHORT[k]} (${k})`).join(', ');

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
    const elsewhere = (NETPOL_KINDS as readonly string[]).includes(kind)
      ? '`cascadectl netpol ...` and `cascadectl lint` cover network policy'
      : '`cascadectl effective|status|explain` cover gateway policies';
    throw new UsageError(`--kind ${kind} is not covered here (${kindNames(allowed)}); ${elsewhere}`);
  }
  return kind;
}
