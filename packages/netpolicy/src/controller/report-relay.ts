// The controller's side of NetpolNodeReports (cluster/node-report.ts): each finding an agent reports
// becomes one Warning Event on the object concerned, posted by the leader once while the finding
// stands (again if it goes and comes back). Agents have no Event grant; the controller, which reads
// the whole cluster anyway, speaks to tenants for them. A restart posts nothing again: the Events
// already posted are listed at start (source cascade-netpol-agent, host = the node).

import {
  type Informer,
  type KubeClient,
  type KubeObject,
  type Logger,
  postWarningEvent,
} from '@cascade/core/kube';
import { AGENT_COMPONENT, FINDING_KINDS, findingKey, nodeReportFromObject } from '../cluster/node-report.ts';

export interface RelayDeps {
  client: KubeClient;
  reports: Informer;
  log: Logger;
  writes: { inc(): void };
}

export class ReportRelay {
  private readonly deps: RelayDeps;
  /** Findings whose Event is out (findingKey). */
  private readonly posted = new Set<string>();
  /** Reports already complained about (name -> error), so a bad one is logged once. */
  private readonly bad = new Map<string, string>();

  constructor(deps: RelayDeps) {
    this.deps = deps;
  }

  /** The Events posted for agents before (by any leader). */
  async seedPosted(): Promise<void> {
    try {
      const r = await this.deps.client.request<{ items: KubeObject[] }>(
        'GET',
        `/api/v1/events?fieldSelector=${encodeURIComponent(`source=${AGENT_COMPONENT}`)}`,
      );
      for (const e of r.items) {
        const o = e as unknown as {
          involvedObject: { kind: string; namespace: string; name: string };
          reason: string;
          message: string;
          source?: { host?: string };
        };
        const f = { ...o.involvedObject, reason: o.reason, message: o.message };
        this.posted.add(findingKey(o.source?.host ?? '', f as never));
      }
    } catch (e) {
      this.deps.log('warn', 'cannot list earlier agent Events: findings may be reported again', {
        error: String(e),
      });
    }
  }

  /** Posts what is new in the reports; forgets what went. Returns how many Events failed. */
  async relay(): Promise<number> {
    const now = new Set<string>();
    let failed = 0;
    for (const [node, o] of this.deps.reports.cache) {
      const spec = nodeReportFromObject(o);
      if ('error' in spec) {
        if (this.bad.get(node) !== spec.error)
          this.deps.log('warn', 'ignoring NetpolNodeReport', { node, error: spec.error });
        this.bad.set(node, spec.error);
        continue;
      }
      this.bad.delete(node);
      for (const f of spec.findings) {
        const key = findingKey(node, f);
        now.add(key);
        if (this.posted.has(key)) continue;
        try {
          this.deps.writes.inc();
          await postWarningEvent(
            this.deps.client,
            { apiVersion: FINDING_KINDS[f.kind], kind: f.kind, namespace: f.namespace, name: f.name },
            f.reason,
            f.message,
            { component: AGENT_COMPONENT, host: node },
          );
          this.posted.add(key);
        } catch (e) {
          failed++;
          this.deps.log('warn', 'agent finding not posted (tried again)', {
            node,
            reason: f.reason,
            error: String(e),
          });
        }
      }
    }
    for (const k of this.posted) if (!now.has(k)) this.posted.delete(k);
    return failed;
  }
}
