// A view of a node's live datapath: the maps and programs pinned under a pin directory, opened
// (never loaded or re-pinned) by another process than the agent, for debugging as cilium-dbg reads
// Cilium's: endpoints, host table, policy entries, conntrack, Services, counters. Reading writes
// nothing; the ring buffer is left to the agent. The one writer is a trace (`run`, then `forgetFlow`):
// a synthetic packet through the real program leaves a conntrack entry, which it removes.
import { Bpfctl } from './bpfctl.ts';
import {
  type CtKey,
  decodeCtKey,
  decodeCtValue,
  decodeEndpointValue,
  decodeIpcacheValue,
  encodeCtKey,
  formatAddr16,
} from './codecs.ts';
import { KernelMaps } from './kernel.ts';
import { ReferenceDatapath } from './reference.ts';
import { decodeServiceMaps } from './services.ts';

export interface LiveEndpoint {
  address: string;
  identity: number;
  ifindex: number;
  revision: number;
  flags: number;
  tables: [[number, number], [number, number]];
}

export class LiveMaps extends KernelMaps {
  private constructor(ctl: Bpfctl) {
    super(ctl);
  }

  /** Opens the maps and programs pinned under `pinDir` (throws naming what is missing). */
  static async open(bpfctl: string, pinDir: string): Promise<LiveMaps> {
    if (!/^\/[A-Za-z0-9_./-]{1,200}$/.test(pinDir) || pinDir.includes('..'))
      throw new Error(`bad pin directory ${JSON.stringify(pinDir.slice(0, 80))}`);
    const live = new LiveMaps(new Bpfctl(bpfctl));
    await live.ctl.send(`open ${pinDir}`);
    return live;
  }

  async endpoints(): Promise<LiveEndpoint[]> {
    return (await this.dump('cascade_endpoints'))
      .map(([k, v]) => ({ address: formatAddr16(k), ...decodeEndpointValue(v) }))
      .sort((a, b) => (a.address < b.address ? -1 : 1));
  }

  /** Host addresses (pods of every node, the nodes) and their identities. */
  async hosts(): Promise<{ address: string; identity: number }[]> {
    return (await this.dump('cascade_hosts'))
      .map(([k, v]) => ({ address: formatAddr16(k), identity: decodeIpcacheValue(v) }))
      .sort((a, b) => (a.address < b.address ? -1 : 1));
  }

  /** Entries of the policy map (a count: the tables are the agent's to name). */
  async policyEntries(): Promise<number> {
    return (await this.dump('cascade_policy')).length;
  }

  /** Conntrack entries, at most `limit` of them decoded, and how many there are. */
  async conntrack(limit = 1000): Promise<{ total: number; entries: Record<string, unknown>[] }> {
    const all = await this.dump('cascade_ct');
    return {
      total: all.length,
      entries: all.slice(0, limit).map(([k, v]) => ({ ...decodeCtKey(k), ...decodeCtValue(v) })),
    };
  }

  /** Service frontends with their backends (decoded as the loader reads them back). */
  async services(): Promise<{ frontend: string; proto: number; backends: string[] }[]> {
    const at = (a: string, port: number) => `${a.includes(':') ? `[${a}]` : a}:${port}`;
    return [
      ...decodeServiceMaps(await this.dump('cascade_services'), await this.dump('cascade_backends')).values(),
    ]
      .map((f) => ({
        frontend: at(f.key.addr, f.key.port),
        proto: f.key.proto,
        backends: f.backends.flatMap((b) => (b ? [at(b.addr, b.port)] : [])),
      }))
      .sort((a, b) => (a.frontend < b.frontend ? -1 : 1));
  }

  /** The reference datapath over what the maps hold now: which entry and rule decide a flow. */
  async reference(): Promise<ReferenceDatapath> {
    return new ReferenceDatapath({
      ipcache: await this.dump('cascade_ipcache'),
      hosts: await this.dump('cascade_hosts'),
      endpoints: await this.dump('cascade_endpoints'),
      policy: await this.dump('cascade_policy'),
      services: await this.dump('cascade_services'),
      backends: await this.dump('cascade_backends'),
      staged: await this.dump('cascade_staged'),
      hostIdentity: await this.hostIdentity(),
    });
  }

  /** Whether conntrack holds an entry for `key`. */
  async tracked(key: CtKey): Promise<boolean> {
    const [line] = await this.ctl
      .send(`lookup cascade_ct ${encodeCtKey(key).toString('hex')}`)
      .catch(() => ['err']);
    return line?.startsWith('ok ') === true && line !== 'ok none';
  }

  /** Removes the conntrack entry of `key` (a trace's own flow; gone already is fine). */
  async forgetFlow(key: CtKey): Promise<void> {
    await this.ctl.send(`delete cascade_ct ${encodeCtKey(key).toString('hex')}`).catch(() => undefined);
  }
}
