// cascade_policies: the family operators alert on, counted from the policies' live status.
import type { Informer } from '../kube/informer.ts';
import type { Metrics } from '../kube/metrics.ts';
import type { Condition } from '../status/conditions.ts';

/** cascade_policies{kind,condition,status,reason}: counted from the policies' live status. */
export function policiesByCondition(metrics: Metrics, kind: string, policies: Informer): void {
  metrics.family(
    'cascade_policies',
    'Policies of the kind by status condition',
    ['kind', 'condition', 'status', 'reason'],
    () => {
      const counts = new Map<string, [Record<string, string>, number]>();
      for (const o of policies.cache.values())
        for (const cnd of (o.status as { conditions?: Condition[] } | undefined)?.conditions ?? []) {
          const labels = { kind, condition: cnd.type, status: cnd.status, reason: cnd.reason };
          const k = JSON.stringify(labels);
          const v = counts.get(k);
          if (v) v[1]++;
          else counts.set(k, [labels, 1]);
        }
      return [...counts.values()];
    },
  );
}
