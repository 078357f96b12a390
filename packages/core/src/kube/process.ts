// What every leader-elected controller of core shares around its reconcile: the informers it starts,
// the HTTP endpoints it serves, the periodic full resync, readiness, leadership and a graceful stop.
// PolicyController and WiringController extend it; each builds its own queue, informers and elector.
import type { Server } from 'node:http';
import type { KubeClient } from './client.ts';
import { type BindAddress, serveEndpoints } from './health.ts';
import { type Informer, startInformers } from './informer.ts';
import type { LeaderElector } from './leader.ts';
import type { Logger } from './logging.ts';
import { Metrics } from './metrics.ts';
import type { WorkQueue } from './queue.ts';

/** What every controller of core is given: the API server, its name, lease, endpoints and pace. */
export interface ProcessOptions {
  client: KubeClient;
  /** Field manager and `cascade.dev/managed-by` of what it writes; its Lease is `<name>-leader`. */
  name: string;
  leaseNamespace?: string;
  leaseDurationSeconds?: number;
  identity?: string;
  /** Serves /metrics, /healthz and /readyz on 127.0.0.1 at this port (tests; 0 picks a free one). */
  metricsPort?: number;
  /** controller-runtime's --metrics-bind-address: /metrics there (undefined: not served). */
  metricsBindAddress?: BindAddress;
  /** controller-runtime's --health-probe-bind-address: /healthz and /readyz there. */
  healthProbeBindAddress?: BindAddress;
  log?: Logger;
  /** Full reconcile (every object compared, orphans collected) at least this often. Default 600. */
  resyncSeconds?: number;
  /** API writes in flight at once within a reconcile. Default 8. */
  writeConcurrency?: number;
  /**
   * --watch-namespace: the namespaced resources (policies, routes, gateways, ReferenceGrants, what it
   * publishes) are listed and watched in these namespaces only; GatewayClasses and Namespaces are
   * cluster-scoped and read as before. Undefined: every namespace.
   */
  watchNamespaces?: readonly string[];
}

export abstract class ControllerProcess {
  readonly metrics = new Metrics();
  protected readonly informers: Informer[] = [];
  protected abstract readonly queue: WorkQueue;
  protected abstract readonly elector: LeaderElector;
  protected abstract readonly opts: ProcessOptions;
  protected abstract readonly log: Logger;
  private readonly servers: Server[] = [];
  private started = false;
  private resyncTimer?: NodeJS.Timeout;

  /** Next reconcile compares every object (what the periodic resync does). */
  abstract resyncNow(): void;
  /** Fields of the "caches synced" log line. */
  protected abstract describe(): Record<string, unknown>;

  /** Ready: every informer has listed and none is failing (an unreachable API server fails it). */
  get ready(): boolean {
    return this.started && this.informers.every((i) => i.synced && i.failing === undefined);
  }

  get leader(): boolean {
    return this.elector.leader;
  }

  async start(): Promise<void> {
    const synced = startInformers(this.informers);
    this.servers.push(...(await serveEndpoints(this.metrics, this.opts, () => this.ready)));
    await synced;
    this.started = true;
    this.resyncTimer = setInterval(() => this.resyncNow(), (this.opts.resyncSeconds ?? 600) * 1000);
    this.resyncTimer.unref();
    this.elector.start();
    this.log('info', 'caches synced', this.describe());
  }

  /** Graceful stop: no new work, finish in-flight reconciles, release the lease. */
  async stop(opts: { releaseLease?: boolean } = {}): Promise<void> {
    for (const i of this.informers) i.stop();
    clearInterval(this.resyncTimer);
    this.queue.stop();
    await this.queue.drain();
    // releaseLease false: leave as a killed process would (the lease expires on its own).
    if (opts.releaseLease === false) this.elector.abandon();
    else await this.elector.release();
    await Promise.all(this.servers.map((srv) => new Promise((r) => srv.close(r))));
  }

  /** Waits until nothing is queued or running (tests). */
  async idle(): Promise<void> {
    await this.queue.drain();
  }
}
