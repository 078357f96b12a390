// The agent's view of its pods' host-side interfaces: found from the kernel (bpf-datapath's
// interfaces.ts: cascade-cni's records, route, neighbour, bridge FDB), never from pod metadata, and
// the programs' attachments reconciled against the kernel's tc hooks. Never detaches: an interface
// whose pod is gone goes with its veth, and one whose pod is unknown keeps dropping everything (no
// endpoint on it) until the pod is known.
import type { Datapath, InterfaceResolver } from '@cascade/bpf-datapath';
import type { Logger } from '@cascade/core/kube';

export class PodLinks {
  /** Local pod address -> ifindex of its host-side interface, as found from the kernel. */
  readonly ifindexByIp = new Map<string, number>();
  private lastFullResolve = 0;
  /** Local addresses not found yet: when each was last looked up. */
  private readonly triedAt = new Map<string, number>();
  /** Interfaces carrying the programs at the last reconcile (read from the kernel). */
  attachedCount = 0;
  private migrationFinished = false;

  private readonly interfaces: InterfaceResolver;
  private readonly log: Logger;

  constructor(interfaces: InterfaceResolver, log: Logger) {
    this.interfaces = interfaces;
    this.log = log;
  }

  /**
   * Finds the host-side interface of every local pod address not known yet; every 30 s all of them
   * again (a recreated pod with the same address has a new veth). Unknown ones are retried soon:
   * `retry` is called when an address was not found at its first look-up.
   */
  async resolve(ips: ReadonlySet<string>, retry: () => void): Promise<void> {
    for (const ip of [...this.ifindexByIp.keys()]) if (!ips.has(ip)) this.ifindexByIp.delete(ip);
    for (const ip of [...this.triedAt.keys()]) if (!ips.has(ip)) this.triedAt.delete(ip);
    const now = Date.now();
    const full = now - this.lastFullResolve > 25_000;
    // an unknown address is looked up at most every 2 s, however often syncs come (each look-up
    // runs iproute2); the 30 s full pass looks up every address again
    const todo = full
      ? [...ips]
      : [...ips].filter((ip) => !this.ifindexByIp.has(ip) && now - (this.triedAt.get(ip) ?? 0) >= 2_000);
    if (!todo.length) return;
    const firstTry = todo.filter((ip) => !this.triedAt.has(ip));
    try {
      const found = await this.interfaces.resolve(todo);
      if (full) this.lastFullResolve = now;
      for (const ip of todo) {
        const i = found.get(ip);
        if (i === undefined) {
          this.ifindexByIp.delete(ip);
          this.triedAt.set(ip, now);
        } else {
          this.ifindexByIp.set(ip, i);
          this.triedAt.delete(ip);
        }
      }
    } catch (e) {
      for (const ip of todo) if (!this.ifindexByIp.has(ip)) this.triedAt.set(ip, now);
      this.log('warn', 'finding pod interfaces failed; retried', { error: String(e) });
    }
    // one quick retry for addresses unknown at their first look-up (a bridged pod's neighbour entry
    // appears after the nudge); addresses that stay unknown wait for the next sync or full pass
    if (firstTry.some((ip) => !this.ifindexByIp.has(ip))) {
      const t = setTimeout(retry, 2_000);
      t.unref();
    }
  }

  /** Attaches the programs to every found interface that does not carry them; `failed` counts failures. */
  async reconcile(dp: Datapath, failed: () => void): Promise<void> {
    const want = new Set(this.ifindexByIp.values());
    let have: Awaited<ReturnType<Datapath['attachments']>>;
    try {
      have = await dp.attachments();
    } catch (e) {
      this.log('warn', 'reading attachments failed; retried', { error: String(e) });
      return;
    }
    for (const ifindex of want) {
      const h = have.get(ifindex);
      if (h?.ingress && h.egress) continue;
      try {
        await dp.attach(ifindex);
        have.set(ifindex, { ingress: true, egress: true });
        this.log('info', 'attached', { ifindex });
      } catch (e) {
        failed();
        this.log('warn', 'attach failed; retried on the next sync', { ifindex, error: String(e) });
      }
    }
    this.attachedCount = have.size;
    // an upgrade from the LRU-hash conntrack: once this load's programs are on every interface, what
    // the older programs added since the load is copied over and the older table let go
    if (dp.migratedFlows !== undefined && !this.migrationFinished && [...want].every((i) => have.has(i))) {
      this.migrationFinished = true;
      try {
        const late = await dp.finishMigration();
        this.log('info', 'conntrack migrated from the older layout', { atLoad: dp.migratedFlows, late });
      } catch (e) {
        this.log('warn', 'conntrack migration not finished; the collector retries', { error: String(e) });
      }
    }
  }
}
