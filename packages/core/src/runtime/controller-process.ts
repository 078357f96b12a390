// What every leader-elected controller of core shares around its reconcile: the informers it starts,
// the HTTP endpoints it serves, the periodic full resync, readiness, leadership and a graceful stop.
// PolicyController and WiringController extend it; each builds its own queue, informers and elector.
import type { Server } from 'node:http';
import { serveEndpoints } from './controller-metrics.ts';
import { type Informer, startInformers } from './informer.ts';
import type { LeaderElector } from './leader.ts';
import { type BindAddress, type Logger, Metrics } from './metrics.ts';
import type { WorkQueue } from './queue.ts';

export interface ProcessOptions {
  metricsPort?: number;
  metricsBindAddress?: BindAddress;
  healthProbeBindAddress?: BindAddress;
  /** Full reconcile at least this often. Default 600. */
  resyncSeconds?: number;
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
