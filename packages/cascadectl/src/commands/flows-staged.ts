// `cascadectl flows --staged`: each flow the agents report judged again by the staged set (every
// Staged* policy's action applied: engine/staged.ts) beside the enforced set, from the cluster's (or
// the files') policies; a flow whose verdict the staged set would change is marked "would deny" or
// "would allow" with the staged rule that decides it. The nodes' datapath judges new flows by the
// staged tables itself and reports those the staged set would decide otherwise (flows.ts takes its
// mark as is); this judges the other reported flows (denied ones, allowed ones of audited namespaces).
import { PROTO } from '@cascade/netpolicy';
import { simulateProbe } from './netpol.ts';
import { describeStagedSide, type StagedPair } from './netpol-staged.ts';
import { ProbeMemo } from './probe-memo.ts';

export interface StagedMark {
  /** the staged set's verdict (undefined: not judged, `note` says why) */
  verdict?: 'allow' | 'deny';
  /** the staged set decides otherwise than the enforced one */
  changed?: boolean;
  /** what decides the staged verdict, when it changes */
  decidedBy?: string;
  note?: string;
}

/** A judge of flows under both sets (memoised: a flow log repeats its pairs). */
export function stagedJudge(
  pair: StagedPair,
): (f: { from: string; to: string; protocol: string; port: number }) => StagedMark {
  const memos = [new ProbeMemo(), new ProbeMemo()] as const;
  return (f) => {
    const proto = PROTO[f.protocol.toUpperCase() as keyof typeof PROTO];
    if (proto === undefined) return { note: `not judged: no policy names ${f.protocol.slice(0, 16)}` };
    try {
      const now = simulateProbe(pair.enforced.engine, f.from, f.to, proto, f.port, memos[0]);
      const then = simulateProbe(pair.staged.engine, f.from, f.to, proto, f.port, memos[1]);
      if (now.verdict === then.verdict) return { verdict: then.verdict, changed: false };
      return {
        verdict: then.verdict,
        changed: true,
        decidedBy: describeStagedSide(pair, { ...then, enforced: now.verdict, staged: then.verdict }),
      };
    } catch (e) {
      // a pod the flow names that is gone: nothing to judge it as
      return { note: `not judged: ${(e as Error).message.slice(0, 200)}` };
    }
  };
}

/** The STAGED column: `=`, `WOULD DENY (ingress: ...)`, or why it was not judged. */
export const stagedCell = (m: StagedMark): string =>
  m.verdict === undefined
    ? `? (${m.note ?? 'not judged'})`
    : m.changed
      ? `WOULD ${m.verdict.toUpperCase()} (${m.decidedBy})`
      : '=';
