// The kernel side every datapath user needs besides the sync: the config entry (verdict-cache epoch,
// conntrack generation and clock), the conntrack collector, test runs of packets, the verdict
// counters, the flow-event ring buffer and the programs' attachments to interfaces.
import type { Bpfctl } from './bpfctl.ts';
import {
  COUNTERS,
  type Config,
  decodeConfig,
  decodeFlowEvent,
  encodeConfig,
  type FlowEvent,
  formatAddr16,
  TEST_RUN_IFINDEX,
} from './codecs.ts';

const hex = (b: Buffer) => b.toString('hex');

export const monotonicSeconds = () => Number(process.hrtime.bigint() / 1_000_000_000n);

const IFNAME = /^[A-Za-z0-9_.@-]{1,15}$/;
/** An interface argument for bpfctl: a positive ifindex, or a name of a safe charset (else throws). */
export function interfaceArg(iface: number | string): string {
  if (typeof iface === 'number') {
    if (!Number.isInteger(iface) || iface <= 0 || iface > 0x7fffffff) throw new Error(`bad ifindex ${iface}`);
    return String(iface);
  }
  if (!IFNAME.test(iface) || /^\d+$/.test(iface))
    throw new Error(`bad interface name ${JSON.stringify(iface)}`);
  return iface;
}

export class KernelMaps {
  readonly ctl: Bpfctl;
  protected config: Config = { epoch: 0, generation: 0, clock: 0, hostIdentity: 0 };

  protected constructor(ctl: Bpfctl) {
    this.ctl = ctl;
  }

  protected async dump(map: string): Promise<[Buffer, Buffer][]> {
    const lines = await this.ctl.send(`dump ${map}`, [], 'count');
    return lines.slice(1).map((l) => {
      const [k, v] = l.split(' ') as [string, string];
      return [Buffer.from(k, 'hex'), Buffer.from(v, 'hex')];
    });
  }

  protected async writeConfig(): Promise<void> {
    await this.ctl.send(`update cascade_config 00000000 ${hex(encodeConfig(this.config))}`);
  }

  /** cascade_config[0] as the kernel holds it (undefined: never written). */
  protected async readConfig(): Promise<Config | undefined> {
    const [cfg] = await this.ctl.send(`lookup cascade_config 00000000`);
    const v = cfg?.split(' ')[1];
    return v && v !== 'none' ? decodeConfig(Buffer.from(v, 'hex')) : undefined;
  }

  /** The identity this node's own addresses (HOST) are judged as, as the kernel holds it (0: always allowed). */
  async hostIdentity(): Promise<number> {
    return (await this.readConfig())?.hostIdentity ?? 0;
  }

  /**
   * Sets the identity this node's own addresses (HOST) are judged as in the admin tier and the
   * baseline (0: HOST always allowed). A change invalidates every cached verdict (one config write).
   */
  async setHostIdentity(identity: number): Promise<boolean> {
    if (!Number.isInteger(identity) || identity < 0 || identity > 0xffffffff)
      throw new Error(`bad host identity ${identity}`);
    if (identity === this.config.hostIdentity) return false;
    this.config.hostIdentity = identity;
    await this.invalidateVerdicts();
    return true;
  }

  /** Invalidates every verdict the kernel has cached (bumps the config epoch): one map write. */
  async invalidateVerdicts(): Promise<void> {
    this.config.epoch = (this.config.epoch + 1) >>> 0;
    await this.writeConfig();
  }

  /**
   * Advances conntrack's clock (seconds of CLOCK_MONOTONIC, the kernel's own monotonic clock, so it
   * keeps counting across agent restarts): packets stamp their flow with it, the collector compares.
   */
  async tick(now = monotonicSeconds()): Promise<void> {
    if (now === this.config.clock) return;
    this.config.clock = now >>> 0;
    await this.writeConfig();
  }

  /**
   * Deletes conntrack entries idle longer than their limit (TCP 6 h, closing TCP 10 s, others 60 s by
   * default; seconds of the clock). Ticks the clock to `now` first.
   */
  async collectConntrack(
    opts: { now?: number; tcp?: number; other?: number; closing?: number } = {},
  ): Promise<{ scanned: number; deleted: number }> {
    const now = opts.now ?? monotonicSeconds();
    await this.tick(now);
    const limits = [opts.tcp ?? 21600, opts.other ?? 60, opts.closing ?? 10];
    const [line] = await this.ctl.send(`ctgc ${now >>> 0} ${limits.join(' ')}`);
    const [, scanned, deleted] = line!.split(' ');
    return { scanned: Number(scanned), deleted: Number(deleted) };
  }

  /**
   * After an upgrade from the LRU-hash conntrack (`migratedFlows` set), once this load's programs are
   * attached everywhere: copies what the older programs added since the load and lets the older
   * table go. How many were copied (0 when there was nothing to migrate).
   */
  async finishMigration(): Promise<number> {
    const [line] = await this.ctl.send('ctmigrate');
    if (!line?.startsWith('ok ') || Number(line.split(' ')[1]) < 0)
      throw new Error(`conntrack migration: ${line}`);
    return Number(line.split(' ')[1]);
  }

  /** Makes every conntrack entry check its endpoint's revision again (bumps the generation). */
  protected async recheckConntrack(): Promise<void> {
    this.config.generation = (this.config.generation + 1) >>> 0;
    await this.writeConfig();
  }

  /** BPF_PROG_TEST_RUN of one packet (repeated), as if it crossed interface `ifindex` (loopback). */
  async run(
    prog: 'from_endpoint' | 'to_endpoint' | 'bench_baseline',
    packet: Buffer,
    repeat = 1,
    ifindex = TEST_RUN_IFINDEX,
  ): Promise<{ retval: number; ns: number /** the packet as the program left it */; out: Buffer }> {
    const [line] = await this.ctl.send(`run ${prog} ${hex(packet)} ${repeat} ${ifindex}`);
    const [, r, d, o] = line!.split(' ');
    return { retval: Number(r), ns: Number(d), out: Buffer.from(o ?? '', 'hex') };
  }

  private counterSlots?: number;

  /** A verdict counter summed over the CPUs; 0 for one the loaded program does not have (an older
   * object has fewer: the e2e runs this agent over the previous datapath). */
  async counter(index: number): Promise<number> {
    this.counterSlots ??= Number((await this.ctl.send('maxentries cascade_counters'))[0]!.split(' ')[1]);
    if (index >= this.counterSlots) return 0;
    const k = Buffer.alloc(4);
    k.writeUInt32LE(index, 0);
    const [line] = await this.ctl.send(`sum cascade_counters ${hex(k)}`);
    return Number(line!.split(' ')[1]);
  }

  /** Every verdict counter, summed over the CPUs. */
  async counters(): Promise<Record<keyof typeof COUNTERS, number>> {
    const out = {} as Record<keyof typeof COUNTERS, number>;
    for (const [name, index] of Object.entries(COUNTERS) as [keyof typeof COUNTERS, number][])
      out[name] = await this.counter(index);
    return out;
  }

  protected async deletes(map: string, keys: string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += 50_000) {
      const chunk = keys.slice(i, i + 50_000);
      await this.ctl.send(`deletes ${map} ${chunk.length}`, chunk);
    }
  }

  async events(): Promise<FlowEvent[]> {
    const lines = await this.ctl.send('events', [], 'until-ok');
    return lines.slice(0, -1).map((l) => decodeFlowEvent(Buffer.from(l, 'hex')));
  }

  /**
   * Conntrack entries each endpoint address holds (cascade_ct_counts: counted by the program, set to
   * the truth by every collection), against CT_ENDPOINT_QUOTA.
   */
  async conntrackCounts(): Promise<Map<string, number>> {
    return new Map(
      (await this.dump('cascade_ct_counts')).map(([k, v]) => [formatAddr16(k), v.readUInt32LE(0)]),
    );
  }

  async clearConntrack(): Promise<void> {
    const [cleared] = await this.ctl.send('ctclear');
    if (!cleared?.startsWith('ok')) throw new Error(`clearing conntrack: ${cleared}`);
    // and what each endpoint address holds of its conntrack quota
    await this.deletes(
      'cascade_ct_counts',
      (await this.dump('cascade_ct_counts')).map(([k]) => hex(k)),
    );
    // the flow cache answers only in the generation its slots were filled in (flowcache.h)
    await this.recheckConntrack();
  }

  /** Attaches both programs to an interface (by ifindex, or by a name the kernel allows). */
  async attach(iface: number | string): Promise<void> {
    const i = interfaceArg(iface);
    // tc ingress of the host-side interface sees what the pod sends: the pod's egress.
    await this.ctl.send(`attach ${i} ingress from_endpoint`);
    await this.ctl.send(`attach ${i} egress to_endpoint`);
  }

  async detach(iface: number | string): Promise<void> {
    const i = interfaceArg(iface);
    await this.ctl.send(`detach ${i} ingress`);
    await this.ctl.send(`detach ${i} egress`);
  }

  /**
   * The interfaces that carry our programs now, read from the kernel (tc hooks, handle 1 / priority
   * 1): what an agent reconciles its attachments against. `complete` when both directions are ours.
   */
  async attachments(): Promise<Map<number, { ingress: boolean; egress: boolean }>> {
    const lines = await this.ctl.send('tclist', [], 'count');
    const out = new Map<number, { ingress: boolean; egress: boolean }>();
    for (const l of lines.slice(1)) {
      const [i, a, b] = l.split(' ').map(Number) as [number, number, number];
      out.set(i, { ingress: a === 1, egress: b === 1 });
    }
    return out;
  }

  async close(): Promise<void> {
    await this.ctl.close();
  }
}
