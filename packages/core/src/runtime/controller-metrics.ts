// The families operators alert on that a controller or agent adds to its registry: policies by
// status condition, watch errors, leadership (ours and client-go's leader_election_master_status);
// and the log lines that go with them: once when a watch or the lease starts failing, once when it
// recovers, never per retry.

import type { Server } from 'node:http';
import { hostname } from 'node:os';
import type { Condition } from '../status/conditions.ts';
import type { KubeClient } from './client.ts';
import type { Informer } from './informer.ts';
import { LeaderElector } from './leader.ts';
import type { BindAddress, Logger, Metrics } from './metrics.ts';

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

/**
 * cascade_watch_errors_total over `informers`, and a log line when one starts failing (`meanwhile`
 * says what that means for this process) and when it recovers; then `recovered` runs (work left
 * pending while not ready).
 */
export function watchHealth(
  informers: readonly Informer[],
  metrics: Metrics,
  log: Logger,
  meanwhile: string,
  recovered: () => void = () => {},
): void {
  const watchErrors = metrics.counter(
    'cascade_watch_errors_total',
    'List and watch errors (the informer retries with backoff)',
  );
  for (const inf of informers) {
    inf.onError = () => watchErrors.inc();
    inf.onHealth = (path, error) => {
      if (error) {
        log('warn', `list/watch failing: retrying with backoff; ${meanwhile}`, { path, error });
        return;
      }
      log('info', 'list/watch recovered', { path });
      recovered();
    };
  }
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
 * The HTTP endpoints of a controller or agent: `port` serves /metrics, /healthz and /readyz on
 * 127.0.0.1 (tests); controller-runtime's --metrics-bind-address serves /metrics and
 * --health-probe-bind-address /healthz and /readyz.
 */
export async function serveEndpoints(
  metrics: Metrics,
  at: { metricsPort?: number; metricsBindAddress?: BindAddress; healthProbeBindAddress?: BindAddress },
  ready: () => boolean,
): Promise<Server[]> {
  const servers: Server[] = [];
  if (at.metricsPort !== undefined) servers.push(await metrics.serve(at.metricsPort, ready));
  if (at.metricsBindAddress) servers.push(await metrics.serveOn(at.metricsBindAddress, ready, 'metrics'));
  if (at.healthProbeBindAddress)
    servers.push(await metrics.serveOn(at.healthProbeBindAddress, ready, 'probes'));
  return servers;
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
