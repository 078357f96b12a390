// The one place that decides a policy's Enforced condition. The fold (conditions.ts) says what the
// policy's rules become on its paths (Enforced, PartiallyEnforced, Overridden, FailedClosed...); this
// ladder then says whether something enforces them, from facts the controller collected. Pure: the
// controller gathers the facts (controller/policy-status.ts), the CLI can pass its own.
//
// The ladder, first rung first (docs/operations.md quotes it). The first rung that holds names the
// reason; a rung marked "while True" applies only to a policy still Enforced=True at that point:
//
//   0. the fold's own result (conditions.ts)
//   1. PublishFailed: an object carrying the policy's rules could not be written (any status)
//   2. MissingDependency: an object carrying its rules has no served resource (while True)
//   3. Pending: its consumer has not reported such an object ready yet (while True)
//   4. MissingDependency: a gateway it reaches has no data plane carrying it (while True)
//   5. MissingDependency: the service its data plane calls (its decision point) has no ready
//      endpoint (while True)
//   6. TargetNotProgrammed: a gateway it reaches is not Accepted/Programmed (while True)
//
// A policy still Enforced=True after the ladder gets the data plane's failure mode appended (what
// requests get when that service cannot answer), so status says which mode each policy runs in.

/** A condition as the ladder reads and writes it (the caller's own type is kept). */
interface EnforcedLike {
  type: string;
  status: string;
  reason: string;
  message: string;
}

/** What the controller knows of a policy's enforcement, beyond the fold. */
export interface EnforcedFacts {
  /** Objects carrying the policy's rules that could not be written, with the API server's message. */
  publishFailures?: readonly { object: string; message: string }[];
  /** Objects carrying its rules that are not in force: their resource not served (`missing`) or not ready. */
  waiting?: readonly { object: string; missing: boolean; why: string }[];
  /** Why gateways it reaches have no data plane carrying its rules (one sentence each, sorted). */
  dataPlaneGaps?: readonly string[];
  /** Why gateways it reaches are not programmed by their controller (one sentence each, sorted). */
  gatewayGaps?: readonly string[];
  /** Why the service its data plane calls cannot answer (one sentence; only for a policy reaching a gateway). */
  backendGap?: string;
  /** What its data plane does when that service cannot answer (one sentence), appended while True. */
  failureMode?: string;
}

type Verdict = { reason: string; message: string } | undefined;

/** One rung: whether it applies to the Enforced condition as it stands, and what it says then. */
interface Rung {
  reason: string;
  onlyWhileTrue: boolean;
  says: (facts: EnforcedFacts) => Verdict;
}

const some = <T>(xs: readonly T[] | undefined): xs is readonly T[] => xs !== undefined && xs.length > 0;
const shownOf = (ws: readonly { object: string; why: string }[]) =>
  ws
    .slice(0, 3)
    .map((w) => `${w.object} (${w.why})`)
    .join(', ') + (ws.length > 3 ? ` and ${ws.length - 3} more` : '');
const gapsShown = (gaps: readonly string[]) =>
  `Policy is not enforced: ${gaps.slice(0, 3).join('; ')}${gaps.length > 3 ? `; and ${gaps.length - 3} more gateways` : ''}`;

/** The ladder after the fold, in order (see the file's comment). */
export const ENFORCED_LADDER: readonly Rung[] = [
  {
    reason: 'PublishFailed',
    onlyWhileTrue: false,
    says: ({ publishFailures: f }) =>
      some(f)
        ? {
            reason: 'PublishFailed',
            message: `Policy is not enforced: could not publish ${f
              .slice(0, 3)
              .map((x) => `${x.object}: ${x.message}`)
              .join('; ')}${f.length > 3 ? `; and ${f.length - 3} more` : ''}`,
          }
        : undefined,
  },
  {
    reason: 'MissingDependency',
    onlyWhileTrue: true,
    says: ({ waiting }) => {
      const missing = (waiting ?? []).filter((w) => w.missing);
      return missing.length
        ? { reason: 'MissingDependency', message: `Policy is not enforced: cannot write ${shownOf(missing)}` }
        : undefined;
    },
  },
  {
    reason: 'Pending',
    onlyWhileTrue: true,
    says: ({ waiting }) =>
      some(waiting)
        ? {
            reason: 'Pending',
            message: `Policy is not enforced yet: waiting for ${shownOf(waiting)} to be ready`,
          }
        : undefined,
  },
  {
    reason: 'MissingDependency',
    onlyWhileTrue: true,
    says: ({ dataPlaneGaps: g }) =>
      some(g) ? { reason: 'MissingDependency', message: gapsShown(g) } : undefined,
  },
  {
    reason: 'MissingDependency',
    onlyWhileTrue: true,
    says: ({ backendGap: g }) =>
      g ? { reason: 'MissingDependency', message: `Policy is not enforced: ${g}` } : undefined,
  },
  {
    reason: 'TargetNotProgrammed',
    onlyWhileTrue: true,
    says: ({ gatewayGaps: g }) =>
      some(g) ? { reason: 'TargetNotProgrammed', message: gapsShown(g) } : undefined,
  },
];

/**
 * The policy's conditions with the Enforced one decided by the ladder: the fold's conditions
 * (`conds`, from policyConditions) and what the controller knows (`facts`). Other conditions unchanged.
 */
export function withEnforcement<C extends EnforcedLike>(conds: C[], facts: EnforcedFacts): C[] {
  return conds.map((c) => {
    if (c.type !== 'Enforced') return c;
    let out = c;
    for (const rung of ENFORCED_LADDER) {
      if (rung.onlyWhileTrue && out.status !== 'True') continue;
      const v = rung.says(facts);
      if (v) out = { ...out, status: 'False', reason: v.reason, message: v.message };
    }
    if (out.status === 'True' && facts.failureMode)
      out = { ...out, message: `${out.message}; ${facts.failureMode}` };
    return out;
  });
}
