// A work queue: events for one key coalesce into one reconcile; failures retry per key with exponential
// backoff; at most `concurrency` reconciles run at once; drain() waits for in-flight work (shutdown).
export class WorkQueue {
  private readonly pending = new Set<string>();
  private readonly running = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private active = 0;
  private stopped = false;
  private idle: (() => void)[] = [];
  private readonly reconcile: (key: string) => Promise<void>;
  private readonly concurrency: number;
  onError?: (key: string, e: unknown) => void;

  constructor(reconcile: (key: string) => Promise<void>, concurrency = 2) {
    this.reconcile = reconcile;
    this.concurrency = concurrency;
  }

  get depth(): number {
    return this.pending.size;
  }

  add(key: string): void {
    if (this.stopped) return;
    this.pending.add(key);
    this.pump();
  }

  private get pumpable(): boolean {
    return !this.stopped;
  }

  private pump(): void {
    if (!this.pumpable) return;
    for (const key of this.pending) {
      if (this.active >= this.concurrency) return;
      if (this.running.has(key)) continue; // one reconcile per key at a time; re-runs after
      this.pending.delete(key);
      this.running.add(key);
      this.active++;
      void this.reconcile(key)
        .then(() => this.failures.delete(key))
        .catch((e) => {
          this.onError?.(key, e);
          if (this.stopped) return; // no retry after shutdown
          const n = (this.failures.get(key) ?? 0) + 1;
          this.failures.set(key, n);
          const t = setTimeout(
            () => {
              this.timers.delete(key);
              this.add(key);
            },
            Math.min(100 * 2 ** n, 30_000),
          );
          this.timers.set(key, t);
        })
        .finally(() => {
          this.running.delete(key);
          this.active--;
          this.pump();
          if (this.active === 0 && this.pending.size === 0) for (const f of this.idle.splice(0)) f();
        });
    }
  }

  /** Resolves when nothing is pending or running. */
  async drain(): Promise<void> {
    if (this.active === 0 && (this.pending.size === 0 || this.stopped)) return;
    await new Promise<void>((r) => this.idle.push(r));
  }

  stop(): void {
    this.stopped = true;
    this.pending.clear();
    for (const t of this.timers.values()) clearTimeout(t);
    if (this.active === 0) for (const f of this.idle.splice(0)) f();
  }
}
