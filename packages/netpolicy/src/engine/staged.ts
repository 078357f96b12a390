// Staged policies: a policy tried before it enforces. Each Staged* kind (group cascade.dev) is the
// standard kind's object with the same spec, inline, plus `spec.stagedAction`: `Set` (the default)
// previews the policy of the same name as written (a new one, or a change of an existing one),
// `Delete` previews removing the policy of that name. A staged policy never changes a verdict: what
// enforces is the standard set; the staged set is that set with every staged action applied, judged
// beside it. Pure: the CLI (offline) and the programs build the staged set with the same function.
import type { NetPolicyObject, PolicyKindName } from './model.ts';
import { buildPolicy, policyKey } from './rules.ts';

export const STAGED_VERSION = 'v1alpha1';
export const STAGED_ACTIONS = ['Set', 'Delete'] as const;
export type StagedAction = (typeof STAGED_ACTIONS)[number];

/** Each staged kind: the kind it stages, its scope, plural and short name (kubectl's). */
export const STAGED_KINDS = {
  StagedNetworkPolicy: {
    stages: 'NetworkPolicy',
    namespaced: true,
    plural: 'stagednetworkpolicies',
    short: 'snetpol',
  },
  StagedAdminNetworkPolicy: {
    stages: 'AdminNetworkPolicy',
    namespaced: false,
    plural: 'stagedadminnetworkpolicies',
    short: 'sanp',
  },
  StagedBaselineAdminNetworkPolicy: {
    stages: 'BaselineAdminNetworkPolicy',
    namespaced: false,
    plural: 'stagedbaselineadminnetworkpolicies',
    short: 'sbanp',
  },
  StagedClusterNetworkPolicy: {
    stages: 'ClusterNetworkPolicy',
    namespaced: false,
    plural: 'stagedclusternetworkpolicies',
    short: 'scnp',
  },
} as const satisfies Record<
  string,
  { stages: PolicyKindName; namespaced: boolean; plural: string; short: string }
>;
export type StagedKindName = keyof typeof STAGED_KINDS;

export const isStagedKind = (kind: string): kind is StagedKindName => Object.hasOwn(STAGED_KINDS, kind);

/** One staged object, read: what it does to which standard policy. */
export interface StagedPolicy {
  kind: StagedKindName;
  action: StagedAction;
  /** The standard policy it sets (its spec without stagedAction) or names for deletion. */
  policy: NetPolicyObject;
}

/** The key the engine gives the standard policy a staged object stands for. */
export const stagedTarget = (s: StagedPolicy): string => policyKey(s.policy);

/** That policy as people name it: `NetworkPolicy shop/deny`, `ClusterNetworkPolicy x`. */
export const stagedTargetName = (s: StagedPolicy): string =>
  `${s.policy.kind} ${s.policy.namespace ? `${s.policy.namespace}/` : ''}${s.policy.name}`;

/**
 * What the standard kind's validation would refuse in a staged Set (its errors, naming the fields);
 * nothing for a Delete. Its status says Invalid; it is judged as the engine enforces such a policy.
 */
export const stagedErrors = (s: StagedPolicy): string[] =>
  s.action === 'Delete' ? [] : buildPolicy(s.policy).errors;

/** A staged object as read from the API or a file; an error names the field. */
export function stagedFromObject(
  kind: StagedKindName,
  o: { metadata: { name: string; namespace?: string }; spec?: unknown },
): StagedPolicy | { error: string } {
  const def = STAGED_KINDS[kind];
  if (!o.spec || typeof o.spec !== 'object' || Array.isArray(o.spec))
    return { error: 'spec: required, an object' };
  const { stagedAction = 'Set', ...spec } = o.spec as Record<string, unknown>;
  if (!STAGED_ACTIONS.includes(stagedAction as StagedAction))
    return { error: `spec.stagedAction: "${String(stagedAction).slice(0, 40)}" is not Set or Delete` };
  if (def.namespaced && !o.metadata.namespace) return { error: 'metadata.namespace: required' };
  const policy: NetPolicyObject = { kind: def.stages, name: o.metadata.name, spec };
  if (def.namespaced) policy.namespace = o.metadata.namespace;
  return { kind, action: stagedAction as StagedAction, policy };
}

/**
 * The staged set: `enforced` with every staged action applied (a Set replaces or adds the policy of
 * its name; a Delete removes it). A Delete of a policy that does not exist is a problem of that staged
 * object; two staged objects for one policy cannot both be (the API has one name per kind).
 */
export function applyStaged(
  enforced: ReadonlyMap<string, NetPolicyObject>,
  staged: readonly StagedPolicy[],
): { policies: Map<string, NetPolicyObject>; problems: { staged: StagedPolicy; error: string }[] } {
  const policies = new Map(enforced);
  const problems: { staged: StagedPolicy; error: string }[] = [];
  for (const s of staged) {
    const key = stagedTarget(s);
    if (s.action === 'Set') policies.set(key, s.policy);
    else if (!policies.delete(key))
      problems.push({
        staged: s,
        error: `spec.stagedAction: Delete: there is no ${stagedTargetName(s)} to delete`,
      });
  }
  return { policies, problems };
}
