// Which pod owns each pod address. The API server does not prevent two live pods from showing one
// address (a reused IP whose old pod is not gone yet, a CNI bug, a stale status): the newest pod
// (creationTimestamp, then namespace/name) owns it, the others lose it, and every conflict is reported.
// Plain data in, plain data out: the agent feeds pod events and upserts what `claim` returns.
import type { Pod } from '../engine/model.ts';

export interface AddressConflict {
  address: string;
  owner: string;
  losers: string[];
}

const newer = (a: Pod, b: Pod) => {
  const ta = a.created ?? '';
  const tb = b.created ?? '';
  if (ta !== tb) return ta > tb;
  return `${a.namespace}/${a.name}` > `${b.namespace}/${b.name}`;
};

export class AddressOwners {
  /** pod key -> the pod as claimed (all its addresses) */
  private readonly claims = new Map<string, Pod>();
  /** address -> pod keys claiming it */
  private readonly byAddress = new Map<string, Set<string>>();

  /**
   * Records a pod's claim (undefined: the pod is gone or owns no address) and returns every pod whose
   * owned addresses may have changed, each with the addresses it now owns (empty: remove it).
   */
  claim(key: string, pod: Pod | undefined): Map<string, Pod | undefined> {
    const touched = new Set<string>();
    const prev = this.claims.get(key);
    for (const ip of prev?.ips ?? []) {
      const s = this.byAddress.get(ip);
      s?.delete(key);
      if (s && !s.size) this.byAddress.delete(ip);
      for (const k of s ?? []) touched.add(k);
    }
    if (pod?.ips.length) {
      this.claims.set(key, pod);
      for (const ip of pod.ips) {
        let s = this.byAddress.get(ip);
        if (!s) this.byAddress.set(ip, (s = new Set()));
        s.add(key);
        for (const k of s) touched.add(k);
      }
    } else this.claims.delete(key);
    touched.add(key);
    const out = new Map<string, Pod | undefined>();
    for (const k of touched) out.set(k, this.owned(k));
    return out;
  }

  /** Every pod claiming an address, with all it claims (what the controller publishes in slices). */
  claimed(): IterableIterator<Pod> {
    return this.claims.values();
  }

  /** The pod as it claims (all its addresses), or undefined when it claims none. */
  claimOf(key: string): Pod | undefined {
    return this.claims.get(key);
  }

  /** The pod with only the addresses it owns, or undefined when it owns none (or is unknown). */
  owned(key: string): Pod | undefined {
    const p = this.claims.get(key);
    if (!p) return undefined;
    const ips = p.ips.filter((ip) => this.ownerOf(ip) === key);
    return ips.length ? { ...p, ips } : undefined;
  }

  ownerOf(address: string): string | undefined {
    let best: Pod | undefined;
    let bestKey: string | undefined;
    for (const k of this.byAddress.get(address) ?? []) {
      const p = this.claims.get(k)!;
      if (!best || newer(p, best)) {
        best = p;
        bestKey = k;
      }
    }
    return bestKey;
  }

  conflicts(): AddressConflict[] {
    const out: AddressConflict[] = [];
    for (const [address, keys] of this.byAddress) {
      if (keys.size < 2) continue;
      const owner = this.ownerOf(address)!;
      out.push({ address, owner, losers: [...keys].filter((k) => k !== owner).sort() });
    }
    return out;
  }
}
