// What an address is, as the engine's state says: the pod or node holding it, and its identity in a
// node's ipcache (its own addresses are HOST there). Each read is memoised until the state changes
// (the engine clears it on every input): identityOf runs per probe, the CLI's truth table per pod pair.
import { AddressOwners, type IpcacheEntry, IpcacheIndex } from './addresses.ts';
import { hostPrefix, type Prefix, prefixKey, WORLD4, WORLD6 } from './cidr.ts';
import { ID, type IdentityInfo } from './identities.ts';
import type { Node, Pod } from './model.ts';

/** The part of the engine's state the reads need. */
export interface AddressState {
  readonly pods: ReadonlyMap<string, Pod>;
  readonly nodes: ReadonlyMap<string, Node>;
  readonly identities: ReadonlyMap<number, IdentityInfo>;
  readonly podIdentity: ReadonlyMap<string, number>;
  readonly nodeIdentity: ReadonlyMap<string, number>;
}

export class AddressReads {
  private readonly ipcacheMemo = new Map<string, IpcacheEntry[]>();
  private readonly indexMemo = new Map<string, IpcacheIndex>();
  /** identityOf's answers by node, then address (the same addresses are judged again and again) */
  private readonly idMemo = new Map<string, Map<string, number>>();
  private owners: AddressOwners | undefined;

  private readonly state: AddressState;

  constructor(state: AddressState) {
    this.state = state;
  }

  clear(): void {
    this.ipcacheMemo.clear();
    this.indexMemo.clear();
    this.idMemo.clear();
    this.owners = undefined;
  }

  podAt(ip: string): Pod | undefined {
    this.owners ??= new AddressOwners(this.state.pods.values(), this.state.nodes.values());
    return this.owners.pod(ip);
  }

  nodeAt(ip: string): Node | undefined {
    this.owners ??= new AddressOwners(this.state.pods.values(), this.state.nodes.values());
    return this.owners.node(ip);
  }

  ipcache(node?: string): IpcacheEntry[] {
    const memo = this.ipcacheMemo.get(node ?? '');
    if (memo) return memo;
    // the addresses nodes and pods hold (the node's own are HOST here)
    const held: IpcacheEntry[] = [];
    for (const [name, n] of this.state.nodes) {
      const id = name === node ? ID.HOST : this.state.nodeIdentity.get(name);
      for (const ip of n.ips) {
        const h = hostPrefix(ip);
        if (h && id !== undefined) held.push({ prefix: h, identity: id });
      }
    }
    for (const [k, p] of this.state.pods) {
      const id = this.state.podIdentity.get(k);
      for (const ip of p.ips) {
        const h = hostPrefix(ip);
        if (h && id !== undefined) held.push({ prefix: h, identity: id });
      }
    }
    // an address a pod or a node holds is that pod or node, even where an ipBlock names exactly it (a
    // /32 or /128 CIDR identity): ipBlocks match a pod through its identity's network parts, and never
    // a node. Left in, the same key twice would resolve one way here (IpcacheIndex: first wins) and
    // the other in the kernel's maps (the loader: last write wins).
    // Only a host-length CIDR can collide, and there are rarely any: the held keys (one per pod
    // address) are made only then.
    const cidrs = [...this.state.identities.values()].filter((i) => i.kind === 'cidr');
    const isHost = (p: Prefix) => p.len === (p.family === 4 ? 32 : 128);
    const heldKeys = cidrs.some((i) => isHost(i.prefix!))
      ? new Set(held.map((e) => prefixKey(e.prefix)))
      : undefined;
    const kept: IpcacheEntry[] = [
      { prefix: WORLD4, identity: ID.WORLD },
      { prefix: WORLD6, identity: ID.WORLD6 },
    ];
    for (const info of cidrs)
      if (!heldKeys?.has(prefixKey(info.prefix!))) kept.push({ prefix: info.prefix!, identity: info.id });
    kept.push(...held);
    this.ipcacheMemo.set(node ?? '', kept);
    return kept;
  }

  identityOf(ip: string, node?: string): number {
    let known = this.idMemo.get(node ?? '');
    if (!known) this.idMemo.set(node ?? '', (known = new Map()));
    let id = known.get(ip);
    if (id !== undefined) return id;
    const h = hostPrefix(ip);
    if (!h) id = ID.WORLD;
    else {
      let index = this.indexMemo.get(node ?? '');
      if (!index) this.indexMemo.set(node ?? '', (index = new IpcacheIndex(this.ipcache(node))));
      id = index.lookup(h) ?? (h.family === 6 ? ID.WORLD6 : ID.WORLD);
    }
    if (known.size >= 100_000) known.clear();
    known.set(ip, id);
    return id;
  }
}
