// Address lookups the CLI and the node agent's model make per probe, per pod pair or per packet: an
// address to its identity (the ipcache as one node sees it) and to the pod or node that holds it.
// Exact (host) addresses are one map lookup; only the shorter prefixes (CIDR identities, world) are
// scanned, so a lookup costs the same at 5 pods as at 10,000.
import { contains, type Prefix, prefixKey } from './cidr.ts';
import type { Node, Pod } from './model.ts';

export interface IpcacheEntry {
  prefix: Prefix;
  identity: number;
}

/** One node's ipcache, indexed: the identity of an address is its most specific prefix's. */
export class IpcacheIndex {
  private readonly hosts = new Map<string, number>();
  private readonly shorter: IpcacheEntry[] = [];

  constructor(entries: readonly IpcacheEntry[]) {
    // a host entry is as specific as a prefix gets: among equals, the first in the list wins (as the
    // scan of the whole list did)
    for (const e of entries) {
      if (e.prefix.len === (e.prefix.family === 4 ? 32 : 128)) {
        const k = prefixKey(e.prefix);
        if (!this.hosts.has(k)) this.hosts.set(k, e.identity);
      } else this.shorter.push(e);
    }
  }

  /** The identity of `h` (a host prefix), or undefined when no prefix holds it. */
  lookup(h: Prefix): number | undefined {
    const exact = this.hosts.get(prefixKey(h));
    if (exact !== undefined) return exact;
    let best: IpcacheEntry | undefined;
    for (const e of this.shorter)
      if (contains(e.prefix, h) && (!best || e.prefix.len > best.prefix.len)) best = e;
    return best?.identity;
  }
}

/** Which pod and which node hold an address (the first of each in iteration order, as a scan finds). */
export class AddressOwners {
  private readonly pods = new Map<string, Pod>();
  private readonly nodes = new Map<string, Node>();

  constructor(pods: Iterable<Pod>, nodes: Iterable<Node>) {
    for (const p of pods) for (const ip of p.ips) if (!this.pods.has(ip)) this.pods.set(ip, p);
    for (const n of nodes) for (const ip of n.ips) if (!this.nodes.has(ip)) this.nodes.set(ip, n);
  }

  pod(ip: string): Pod | undefined {
    return this.pods.get(ip);
  }

  node(ip: string): Node | undefined {
    return this.nodes.get(ip);
  }
}
