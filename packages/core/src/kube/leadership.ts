// Leader election as a controller runs it: the Lease, the leadership families (ours and client-go's
// leader_election_master_status), transitions counted and logged, lease errors logged once when
// they start and once when they stop, never per retry.

import { hostname } from 'node:os';
import type { KubeClient } from './client.ts';
import { LeaderElector } from './leader.ts';
import type { Logger } from './logging.ts';
import type { Metrics } from './metrics.ts';

/** Lease errors, transitions, and the leader gauges (cascade_leader and client-go's family). */
export function leaderMetrics(metrics: Metrics, leaseName: string, isLeader: () => boolean) {
  const leaseErrors = metrics.counter('cascade_lease_errors_total', 'Lease acquire/renew errors');
  const transitions = metrics.counter(
    'cascade_leader_transitions_total',
    'Times this replica became or stopped being the leader',
  );
  metrics.gauge('cascade_leader', '1 while this replica holds the lease', () => (isLeader() ? 1 : 0));
  metrics.family(
    'leader_election_master_status',
    '1 while this replica is the leader of the lease',
    ['name'],
    () => [[{ name: leaseName }, isLeader() ? 1 : 0]],
  );
  return { leaseErrors, transitions };
}

/** Lease errors counted and logged once when acquiring or renewing starts failing and when it recovers. */
export function leaseHealth(
  elector: LeaderElector,
  leaseErrors: ReturnType<Metrics['counter']>,
  log: Logger,
): void {
  elector.onError = (error) => {
    if (error) {
      leaseErrors.inc();
      log('warn', 'lease acquire/renew failing: not leading until it succeeds', { error });
    } else log('info', 'lease acquire/renew recovered');
  };
}

/**
 * A controller's leader election with its metrics and log lines: the Lease `<name>-leader` in
 * `leaseNamespace`, the leadership families, transitions counted and logged, lease errors logged once
 * per state change; `onLeader` runs each time this replica becomes the leader.
 */
export function electedLeader(
  client: KubeClient,
  opts: { name: string; leaseNamespace?: string; identity?: string; leaseDurationSeconds?: number },
  metrics: Metrics,
  log: Logger,
  onLeader: () => void,
): LeaderElector {
  let elector: LeaderElector | undefined;
  const { leaseErrors, transitions } = leaderMetrics(metrics, `${opts.name}-leader`, () =>
    Boolean(elector?.leader),
  );
  elector = new LeaderElector(
    client,
    opts.leaseNamespace ?? 'default',
    `${opts.name}-leader`,
    opts.identity ?? `${hostname()}-${process.pid}`,
    opts.leaseDurationSeconds ?? 15,
    (leader) => {
      transitions.inc();
      log('info', leader ? 'became leader' : 'lost leadership');
      if (leader) onLeader();
    },
  );
  leaseHealth(elector, leaseErrors, log);
  return elector;
}
