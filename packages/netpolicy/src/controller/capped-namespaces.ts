// Namespaces past the identity cap (engine/identity-cap.ts), reported where an admin looks: a
// Warning Event on the Namespace, a log line and the cascade_netpol_capped_label_sets family. The
// pods left out are the namespace's own newest label sets, so nothing else changes for anyone; the
// report says which peers stop admitting them. Reported when a namespace goes over the cap and again
// each time its capped count doubles (a tenant adding pods one by one makes a few Events, not one per
// pod), and logged when it is back under.

import type { InvolvedObject, Logger, Metrics } from '@cascade/core/kube';
import type { CappedNamespace } from '../engine/index.ts';
import { describeTenant } from '../engine/tenants.ts';

export interface CappedReportDeps {
  metrics: Metrics;
  log: Logger;
  post: (obj: InvolvedObject, reason: string, message: string) => Promise<unknown>;
}

export class CappedNamespaceReport {
  private readonly reported = new Map<string, number>();
  private current: CappedNamespace[] = [];
  private readonly deps: CappedReportDeps;

  constructor(deps: CappedReportDeps) {
    this.deps = deps;
    deps.metrics.family(
      'cascade_netpol_capped_label_sets',
      "Pod label sets past their namespace's identity cap: other namespaces' NetworkPolicies leave them out",
      ['namespace'],
      () => this.current.map((c) => [{ namespace: c.namespace }, c.capped]),
    );
  }

  /** Compares with what was reported; posts what is new. Never throws (an Event is best effort). */
  async update(over: CappedNamespace[], cap: number): Promise<void> {
    this.current = over;
    const now = new Set(over.map((c) => c.namespace));
    for (const ns of [...this.reported.keys()])
      if (!now.has(ns)) {
        this.reported.delete(ns);
        this.deps.log('info', 'namespace back under the identity cap', { namespace: ns, cap });
      }
    for (const c of over) {
      const last = this.reported.get(c.namespace);
      if (last !== undefined && c.capped < 2 * last) continue;
      this.reported.set(c.namespace, c.capped);
      const over = c.tenant
        ? `${c.labelSets} distinct pod label sets, with the other namespaces of ${describeTenant(c.tenant)} over its identity cap of ${cap}`
        : `${c.labelSets} distinct pod label sets, over the identity cap of ${cap}`;
      const message = `${over}: the ${c.capped} newest are left out of other namespaces' NetworkPolicy peers that select pods by label, which do not admit their pods; this namespace's own NetworkPolicies and every admin policy still apply to them`;
      this.deps.log('warn', 'namespace over the identity cap', { ...c, cap });
      await this.deps
        .post(
          { apiVersion: 'v1', kind: 'Namespace', namespace: '', name: c.namespace },
          'IdentityCapReached',
          message,
        )
        .catch((e: unknown) =>
          this.deps.log('warn', 'event not recorded', { reason: 'IdentityCapReached', error: String(e) }),
        );
    }
  }
}
