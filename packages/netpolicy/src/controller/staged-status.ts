// Staged policies' status, written by the netpolicy-controller (leader only): `Accepted` True when a
// staged object is one its standard kind would accept (the same checks: engine/rules.ts), False
// naming what is wrong (reason Invalid), or, for a Delete, naming the missing policy (reason
// TargetNotFound). A staged policy never enforces; the message says where to see what it would do.
// Written only when it differs from what the live object says (a restart writes nothing).
import { EFFECTIVE_GROUP } from '@cascade/core';
import { Informer, type KubeClient, type KubeObject, type Logger } from '@cascade/core/kube';
import { nodeReportFromObject, STAGED_WINDOW_SECONDS } from '../cluster/node-report.ts';
import { STAGED_BASE } from '../cluster/watch.ts';

type Counter = { inc(n?: number): void };

import type { NetpolEngine } from '../engine/engine.ts';
import { buildPolicy } from '../engine/rules.ts';
import {
  STAGED_KINDS,
  STAGED_VERSION,
  type StagedKindName,
  stagedFromObject,
  stagedTarget,
  stagedTargetName,
} from '../engine/staged.ts';
import { stagedObjectKey } from '../engine/staged-view.ts';

/** A condition's message at most (the API has no limit of its own; a reader does). */
const MAX_MESSAGE = 1024;

export interface StagedCondition {
  type: 'Accepted';
  status: 'True' | 'False';
  reason: 'Staged' | 'Invalid' | 'TargetNotFound';
  message: string;
}

/** What a staged object's status says, given the enforced policies (`has`: a policy key exists). */
export function stagedCondition(
  kind: StagedKindName,
  o: { metadata: { name: string; namespace?: string }; spec?: unknown },
  has: (key: string) => boolean,
): StagedCondition {
  const cut = (m: string) => (m.length > MAX_MESSAGE ? `${m.slice(0, MAX_MESSAGE - 1)}…` : m);
  const s = stagedFromObject(kind, o);
  if ('error' in s) return { type: 'Accepted', status: 'False', reason: 'Invalid', message: cut(s.error) };
  const target = stagedTarget(s);
  const named = stagedTargetName(s);
  if (s.action === 'Delete')
    return has(target)
      ? {
          type: 'Accepted',
          status: 'True',
          reason: 'Staged',
          message: `staged: the removal of ${named}; never enforced (cascadectl netpol simulate --staged shows what it would change)`,
        }
      : {
          type: 'Accepted',
          status: 'False',
          reason: 'TargetNotFound',
          message: `there is no ${named} to delete`,
        };
  const built = buildPolicy(s.policy);
  if (built.errors.length)
    return {
      type: 'Accepted',
      status: 'False',
      reason: 'Invalid',
      message: cut(`${named} would be refused: ${built.errors.join('; ')}`),
    };
  return {
    type: 'Accepted',
    status: 'True',
    reason: 'Staged',
    message: cut(
      `staged: ${has(target) ? 'a change of' : 'a new'} ${named}; never enforced (cascadectl netpol simulate --staged shows what it would change)${built.warnings.length ? `; warnings: ${built.warnings.join('; ')}` : ''}`,
    ),
  };
}

/**
 * A staged object's `status.flows`: the new flows the nodes' datapath judged otherwise under the
 * staged set in the last window, summed over every node's NetpolNodeReport, by rule.
 */
export interface StagedFlows {
  windowSeconds: number;
  wouldDeny: number;
  wouldAllow: number;
  byRule: { direction: 'ingress' | 'egress'; verdict: 'allow' | 'deny'; rule: string; flows: number }[];
}

/** Every staged object's flows from the nodes' reports, by staged key (`StagedNetworkPolicy/ns/x`). */
export function stagedFlowsByKey(reports: Iterable<{ spec?: unknown }>): Map<string, StagedFlows> {
  const out = new Map<string, StagedFlows>();
  /** each staged object's counts by direction, verdict and rule, summed over the nodes */
  const byRule = new Map<string, { staged: string; rule: StagedFlows['byRule'][number] }>();
  for (const o of reports) {
    const spec = nodeReportFromObject(o);
    if ('error' in spec) continue;
    for (const c of spec.stagedFlows ?? []) {
      let f = out.get(c.staged);
      if (!f)
        out.set(
          c.staged,
          (f = { windowSeconds: STAGED_WINDOW_SECONDS, wouldDeny: 0, wouldAllow: 0, byRule: [] }),
        );
      if (c.verdict === 'deny') f.wouldDeny += c.flows;
      else f.wouldAllow += c.flows;
      const rule = c.rule ?? '(no rule: default)';
      const k = JSON.stringify([c.staged, c.direction, c.verdict, rule]);
      const known = byRule.get(k);
      if (known) known.rule.flows += c.flows;
      else
        byRule.set(k, {
          staged: c.staged,
          rule: { direction: c.direction, verdict: c.verdict, rule, flows: c.flows },
        });
    }
  }
  const sorted = [...byRule].sort((a, b) => b[1].rule.flows - a[1].rule.flows || (a[0] < b[0] ? -1 : 1));
  for (const [, { staged, rule }] of sorted) {
    const f = out.get(staged)!;
    if (f.byRule.length < 32) f.byRule.push(rule);
  }
  return out;
}

export interface StagedStatusDeps {
  client: KubeClient;
  name: string;
  engine: NetpolEngine;
  changed: () => void;
  writes: Counter;
  skipped: Counter;
  log: Logger;
  /** The NetpolNodeReports (their staged-flow counts go into each staged object's status.flows). */
  reports?: () => Iterable<KubeObject>;
}

export class StagedStatus {
  readonly informers: Informer[];
  private readonly byKind = new Map<StagedKindName, Informer>();

  private readonly deps: StagedStatusDeps;

  constructor(deps: StagedStatusDeps) {
    this.deps = deps;
    this.informers = (Object.keys(STAGED_KINDS) as StagedKindName[]).map((kind) => {
      // optional: a cluster without the staged CRDs has nothing to report
      const inf = new Informer(
        deps.client,
        `${STAGED_BASE}/${STAGED_KINDS[kind].plural}`,
        () => deps.changed(),
        undefined,
        true,
      );
      this.byKind.set(kind, inf);
      return inf;
    });
  }

  /** Every staged object's condition compared with its live status; the differing ones written. */
  async publish(): Promise<void> {
    const has = (key: string) => this.deps.engine.policies.has(key);
    const flows = stagedFlowsByKey(this.deps.reports?.() ?? []);
    for (const [kind, inf] of this.byKind)
      for (const o of [...inf.cache.values()]) {
        const key = stagedObjectKey(kind, o.metadata);
        try {
          await this.write(kind, inf, o, stagedCondition(kind, o as never, has), flows.get(key));
        } catch (e) {
          this.deps.log('warn', 'staged policy status not written; retried on the next change', {
            object: `${kind} ${Informer.key(o)}`,
            error: String(e).slice(0, 300),
          });
        }
      }
  }

  private async write(
    kind: StagedKindName,
    inf: Informer,
    o: KubeObject,
    c: StagedCondition,
    flows: StagedFlows | undefined,
  ): Promise<void> {
    const status = o.status as
      | {
          conditions?: (StagedCondition & { lastTransitionTime?: string; observedGeneration?: number })[];
          flows?: StagedFlows;
        }
      | undefined;
    const old = status?.conditions?.find((x) => x.type === c.type);
    const generation = o.metadata.generation ?? 0;
    if (
      old &&
      old.status === c.status &&
      old.reason === c.reason &&
      old.message === c.message &&
      old.observedGeneration === generation &&
      JSON.stringify(status?.flows ?? null) === JSON.stringify(flows ?? null)
    ) {
      this.deps.skipped.inc();
      return;
    }
    const condition = {
      ...c,
      observedGeneration: generation,
      lastTransitionTime:
        old && old.status === c.status && old.lastTransitionTime
          ? old.lastTransitionTime
          : new Date().toISOString(),
    };
    const ns = o.metadata.namespace;
    const path = `${STAGED_BASE}${ns ? `/namespaces/${encodeURIComponent(ns)}` : ''}/${STAGED_KINDS[kind].plural}/${encodeURIComponent(o.metadata.name)}/status`;
    this.deps.writes.inc();
    const applied = await this.deps.client.apply(
      path,
      {
        apiVersion: `${EFFECTIVE_GROUP}/${STAGED_VERSION}`,
        kind,
        metadata: { name: o.metadata.name, ...(ns ? { namespace: ns } : {}) },
        status: { conditions: [condition], ...(flows ? { flows } : {}) },
      },
      this.deps.name,
    );
    inf.cache.set(Informer.key(o), applied);
  }
}
