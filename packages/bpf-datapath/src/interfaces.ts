// Where a local pod's packets enter and leave the node: its host-side veth, found from the kernel and
// never from anything a pod owner writes (annotations, labels). Two CNI shapes are covered:
//   routed (ptp, Calico): the route to the pod address leaves through the pod's veth;
//   bridged (bridge plugin, flannel's cni0): the route leaves through the bridge; the neighbour entry
//     gives the pod's MAC and the bridge's forwarding database the port (the veth) that MAC is on.
//   recorded: the CNI chaining plugin (cascade-cni) writes, at ADD, which host veth carries which
//     addresses of the pod interface, read from the kernel in the pod's namespace. It is consulted
//     first: on a bridge the neighbour entry needs the pod's own ARP, which the program drops until the
//     endpoint is bound. A record counts only while its veth still exists under the recorded name.
// Anything else (the uplink, a tunnel, loopback) is not a pod interface and is never returned.
// Reads through iproute2 (`ip -j`, `bridge -j`): one `ip -batch` for all addresses, argument vectors
// only, every address checked to be an IP literal first.
import { createSocket } from 'node:dgram';
import { readdir, readFile, stat } from 'node:fs/promises';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { addr16 } from './codecs.ts';
import { runCommand } from './command.ts';

export interface Link {
  ifindex: number;
  ifname: string;
  kind?: string;
  master?: string;
}

/** Resolves pod addresses to the ifindex of their host-side interface (absent: not found yet). */
export interface InterfaceResolver {
  resolve(addresses: readonly string[]): Promise<Map<string, number>>;
}

// every lookup here keeps what it could read: a missing neighbour or route must not hide the others
const run = (cmd: string, args: string[], input?: string) =>
  runCommand(cmd, args, { input, keepPartialOutput: true });

/** Concatenated JSON arrays (one per batch command) as one list. */
function jsonArrays(text: string): unknown[] {
  const out: unknown[] = [];
  for (const line of text.split('\n')) {
    const t = line.trim();
    if (!t.startsWith('[')) continue;
    try {
      out.push(...(JSON.parse(t) as unknown[]));
    } catch {}
  }
  return out;
}

const norm = (ip: string) => addr16(ip).toString('hex');

/** At most this many records are read (a node runs at most a few hundred pods). */
const MAX_RECORDS = 4096;
const MAX_RECORD_BYTES = 4096;

export interface EndpointRecord {
  ifindex: number;
  ifname: string;
  addresses: string[];
  mtimeMs: number;
}

/** One cascade-cni record, or undefined when it is not one (wrong shape, bad names or addresses). */
export function parseEndpointRecord(text: string, mtimeMs = 0): EndpointRecord | undefined {
  if (text.length > MAX_RECORD_BYTES) return undefined;
  let ifindex = 0;
  let ifname = '';
  const addresses: string[] = [];
  for (const line of text.split('\n')) {
    if (!line) continue;
    const [key, value, extra] = line.split(' ');
    if (!value || extra !== undefined) return undefined;
    if (key === 'ifindex' && /^[1-9][0-9]{0,9}$/.test(value)) ifindex = Number(value);
    else if (key === 'ifname' && /^[A-Za-z0-9_.@-]{1,15}$/.test(value)) ifname = value;
    else if (key === 'addr' && isIP(value)) addresses.push(value);
    else return undefined;
  }
  return ifindex && ifname ? { ifindex, ifname, addresses, mtimeMs } : undefined;
}

export class KernelInterfaces implements InterfaceResolver {
  /** Addresses whose neighbour entry was missing: nudged (one datagram) at most every 10 s. */
  private readonly nudged = new Map<string, number>();
  /** cascade-cni's record directory (absent: routes and the bridge only). */
  private readonly recordDir: string | undefined;

  constructor(opts: { recordDir?: string } = {}) {
    this.recordDir = opts.recordDir;
  }

  /** The records whose veth still exists under the recorded name and index. */
  async records(links: Map<string, Link>): Promise<EndpointRecord[]> {
    if (!this.recordDir) return [];
    let names: string[];
    try {
      names = (await readdir(this.recordDir)).filter((n) => !n.startsWith('.')).slice(0, MAX_RECORDS);
    } catch {
      return [];
    }
    const out: EndpointRecord[] = [];
    for (const name of names) {
      try {
        const path = join(this.recordDir, name);
        const st = await stat(path);
        if (!st.isFile() || st.size > MAX_RECORD_BYTES) continue;
        const rec = parseEndpointRecord(await readFile(path, 'utf8'), st.mtimeMs);
        const link = rec ? links.get(rec.ifname) : undefined;
        if (rec && link?.kind === 'veth' && link.ifindex === rec.ifindex) out.push(rec);
      } catch {}
    }
    return out;
  }

  async links(): Promise<Map<string, Link>> {
    const raw = JSON.parse(await run('ip', ['-j', '-d', 'link', 'show'])) as {
      ifindex: number;
      ifname: string;
      master?: string;
      linkinfo?: { info_kind?: string };
    }[];
    const out = new Map<string, Link>();
    for (const l of raw) {
      const link: Link = { ifindex: l.ifindex, ifname: l.ifname };
      if (l.linkinfo?.info_kind) link.kind = l.linkinfo.info_kind;
      if (l.master) link.master = l.master;
      out.set(l.ifname, link);
    }
    return out;
  }

  async resolve(addresses: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    const ips = [...new Set(addresses)].filter((a) => isIP(a) !== 0);
    if (!ips.length) return out;
    const links = await this.links();
    const wanted = new Map(ips.map((ip) => [norm(ip), ip]));
    // newest record first: an address reused after a missed DEL belongs to the newer pod
    const recorded = (await this.records(links)).sort((a, b) => b.mtimeMs - a.mtimeMs);
    for (const rec of recorded)
      for (const a of rec.addresses) {
        const ip = wanted.get(norm(a));
        if (ip && !out.has(ip)) out.set(ip, rec.ifindex);
      }
    const rest = ips.filter((ip) => !out.has(ip));
    if (!rest.length) return out;
    // -force: one unreachable address must not stop the batch (its answer is simply missing)
    const routes = jsonArrays(
      await run('ip', ['-j', '-force', '-batch', '-'], `${rest.map((ip) => `route get ${ip}`).join('\n')}\n`),
    ) as { dst?: string; dev?: string; type?: string }[];
    const viaBridge = new Map<string, string[]>();
    for (const r of routes) {
      if (!r.dst || !r.dev || !isIP(r.dst) || (r.type && r.type !== 'unicast')) continue;
      const ip = wanted.get(norm(r.dst));
      const link = links.get(r.dev);
      if (!ip || !link) continue;
      if (link.kind === 'veth') out.set(ip, link.ifindex);
      else if (link.kind === 'bridge')
        viaBridge.set(link.ifname, [...(viaBridge.get(link.ifname) ?? []), ip]);
    }
    for (const [bridge, bips] of viaBridge) {
      const neigh = jsonArrays(await run('ip', ['-j', 'neigh', 'show', 'dev', bridge])) as {
        dst?: string;
        lladdr?: string;
        state?: string[];
      }[];
      const macOf = new Map<string, string>();
      for (const n of neigh)
        if (n.dst && isIP(n.dst) && n.lladdr && !n.state?.includes('FAILED'))
          macOf.set(norm(n.dst), n.lladdr.toLowerCase());
      const fdb = jsonArrays(await run('bridge', ['-j', 'fdb', 'show', 'br', bridge])) as {
        mac?: string;
        ifname?: string;
        flags?: string[];
        state?: string;
      }[];
      const portOf = new Map<string, string>();
      for (const f of fdb)
        if (f.mac && f.ifname && !f.flags?.includes('self') && f.state !== 'permanent')
          portOf.set(f.mac.toLowerCase(), f.ifname);
      for (const ip of bips) {
        const mac = macOf.get(norm(ip));
        const port = mac ? portOf.get(mac) : undefined;
        const link = port ? links.get(port) : undefined;
        if (link?.kind === 'veth' && link.master === bridge) out.set(ip, link.ifindex);
        else this.nudge(ip);
      }
    }
    return out;
  }

  /**
   * Makes the kernel resolve a bridged pod's neighbour entry: one datagram from the node to the
   * discard port (node-to-pod traffic is always allowed); the answer is there on the next resolve.
   */
  private nudge(ip: string): void {
    const now = Date.now();
    if ((this.nudged.get(ip) ?? 0) > now - 10_000) return;
    if (this.nudged.size > 100_000) this.nudged.clear();
    this.nudged.set(ip, now);
    const s = createSocket(isIP(ip) === 6 ? 'udp6' : 'udp4');
    s.on('error', () => s.close());
    s.send(Buffer.alloc(0), 9, ip, () => s.close());
  }
}

/** Every address on one interface: offline states and BPF_PROG_TEST_RUN (the loopback). */
export class FixedInterface implements InterfaceResolver {
  private readonly ifindex: number;
  constructor(ifindex: number) {
    this.ifindex = ifindex;
  }
  async resolve(addresses: readonly string[]): Promise<Map<string, number>> {
    return new Map(addresses.map((a) => [a, this.ifindex]));
  }
}
