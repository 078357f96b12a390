// Which identities can share a MapState table: the same rules in a layer (and, for ingress rules
// with named ports, the same own named ports) lower to the same entries, so they get the same id.
import { createHash } from 'node:crypto';
import type { IdentityInfo } from './identities.ts';
import type { Layer } from './lower.ts';
import type { Direction, Rule } from './rules.ts';
import type { Selection } from './selection.ts';
import type { TieredRules } from './tiers.ts';

/** The rules a layer lowers: admin; or NetworkPolicy when isolated, else baseline. */
export function layerRules(t: TieredRules, layer: Layer): Rule[] {
  return layer === 'admin' ? t.admin : t.isolation.length > 0 ? t.np : t.baseline;
}

export class TableIds {
  /** tableId per tiers object, direction, layer and own named ports (tiers objects are shared). */
  private ids = new WeakMap<TieredRules, Map<string, string>>();
  private readonly rev: (r: Rule) => string;
  private readonly select: (r: Rule, i: number) => Selection;

  /** `rev`: a rule's id and policy revision; `select`: what a rule's peer selects. */
  constructor(rev: (r: Rule) => string, select: (r: Rule, i: number) => Selection) {
    this.rev = rev;
    this.select = select;
  }

  /** Forgets every id (selections were recomputed: an "all pods" peer may have flipped). */
  reset(): void {
    this.ids = new WeakMap();
  }

  get(info: IdentityInfo, d: Direction, t: TieredRules, layer: Layer): string {
    const named =
      d === 'ingress' && layerRules(t, layer).some((r) => r.ports?.some((p) => p.kind === 'named'));
    let byKey = this.ids.get(t);
    if (!byKey) this.ids.set(t, (byKey = new Map()));
    const k = `${d}|${layer}|${named ? JSON.stringify(info.ports) : ''}`;
    let id = byKey.get(k);
    if (id === undefined) byKey.set(k, (id = this.compute(info, d, t, layer, named)));
    return id;
  }

  private compute(info: IdentityInfo, d: Direction, t: TieredRules, layer: Layer, named: boolean): string {
    // A networks peer lowered as "all pods" is part of the table's identity: if that flips, re-lower.
    const allPods = (r: Rule) =>
      r.peers
        .map((p, i) =>
          p.kind === 'cidr' && p.pods && (this.select(r, i) as { allPods?: boolean }).allPods ? '*' : '',
        )
        .join('');
    const rev = (r: Rule) => `${this.rev(r)}${allPods(r)}`;
    const sig = JSON.stringify([
      d,
      layer,
      layer === 'admin' ? [] : t.isolation.map((i) => i.policy),
      layerRules(t, layer).map(rev),
      named ? info.ports : null,
    ]);
    return createHash('sha1').update(sig).digest('hex').slice(0, 16);
  }
}
