// The engine's tables: MapState layers named by their content (table-ids.ts), shared by every
// identity whose rules lower to the same entries, in either view (the enforced rules or the staged
// set's, staged-view.ts). Lowered once when first needed, freed when no identity uses them, and patched
// in place when identities appear or vanish as remotes.
import type { IdentityInfo } from './identities.ts';
import { type Layer, type LowerContext, lowerLayer } from './lower.ts';
import type { MapState } from './mapstate.ts';
import type { RuleGroups } from './rule-groups.ts';
import type { Direction, Rule } from './rules.ts';
import { layerRules, type TableIds } from './table-ids.ts';
import type { TieredRules } from './tiers.ts';

export const DIRECTIONS: readonly Direction[] = ['ingress', 'egress'];
export const LAYERS: readonly Layer[] = ['admin', 'lower'];

export type LayerIds = Record<Direction, Record<Layer, string>>;

export function sameLayers(a: LayerIds, b: LayerIds): boolean {
  return DIRECTIONS.every((d) => LAYERS.every((l) => a[d][l] === b[d][l]));
}

export interface Table {
  id: string;
  direction: Direction;
  layer: Layer;
  tiers: TieredRules;
  state: MapState;
  /** Identities (subjects) using it, in either view. */
  subjects: Set<number>;
}

/** What patching the tables for new and gone remote identities did. */
export interface RemotePatch {
  added: ReadonlySet<number>;
  removed: ReadonlySet<number>;
  /** Rules that select an added identity (their tables need its bucket). */
  selecting: ReadonlySet<Rule>;
  /** Tables that existed before this flush (those lowered during it are complete already). */
  before: ReadonlyMap<string, number>;
}

export class TableStore {
  readonly tables = new Map<string, Table>();
  /** Rule -> ids of the tables (layers) holding it: where a newly selected identity needs entries. */
  private readonly ruleTables = new Map<Rule, Set<string>>();
  private readonly tableIds: TableIds;
  private readonly ctx: (info: IdentityInfo, d: Direction) => LowerContext;

  constructor(tableIds: TableIds, ctx: (info: IdentityInfo, d: Direction) => LowerContext) {
    this.tableIds = tableIds;
    this.ctx = ctx;
  }

  /** Forgets every table id (selections were recomputed: an "all pods" peer may have flipped). */
  resetIds(): void {
    this.tableIds.reset();
  }

  clear(): void {
    this.tables.clear();
    this.ruleTables.clear();
  }

  /** The table ids of an identity in one view (its rule groups); returns how many were lowered now. */
  assign(groups: RuleGroups, info: IdentityInfo): { ids: LayerIds; lowered: number } {
    const ids = {} as LayerIds;
    let lowered = 0;
    const matched = groups.groupsOf(info);
    for (const d of DIRECTIONS) {
      const tiers = groups.tiers(info, d, matched);
      ids[d] = { admin: '', lower: '' };
      for (const layer of LAYERS) {
        const tid = this.tableIds.get(info, d, tiers, layer);
        ids[d][layer] = tid;
        if (this.tables.has(tid)) continue;
        const state = lowerLayer(layer, tiers, this.ctx(info, d));
        const t: Table = { id: tid, direction: d, layer, tiers, state, subjects: new Set() };
        this.tables.set(tid, t);
        this.index(t, true);
        lowered++;
      }
    }
    return { ids, lowered };
  }

  attach(id: number, view: LayerIds): void {
    for (const d of DIRECTIONS) for (const layer of LAYERS) this.tables.get(view[d][layer])!.subjects.add(id);
  }

  detach(id: number, view: LayerIds): void {
    for (const d of DIRECTIONS)
      for (const layer of LAYERS) this.tables.get(view[d][layer])?.subjects.delete(id);
  }

  /** Frees the tables no identity uses. */
  dropUnused(): void {
    for (const [id, t] of [...this.tables]) {
      if (t.subjects.size > 0) continue;
      this.tables.delete(id);
      this.index(t, false);
    }
  }

  /**
   * Identities that appeared or vanished as remotes: their buckets patched in the existing tables
   * (safe in place: no packet carries a new identity before the ipcache maps an address to it).
   * Returns how many tables changed.
   */
  patchRemotes(p: RemotePatch, identities: ReadonlyMap<number, IdentityInfo>): number {
    const toPatch = new Set<string>();
    for (const r of p.selecting) for (const id of this.ruleTables.get(r) ?? []) toPatch.add(id);
    let updated = 0;
    for (const t of this.tables.values()) {
      if (!p.before.has(t.id)) continue; // lowered just now, already complete
      let touched = false;
      for (const id of p.removed) {
        if (t.state.bucket(id).length) {
          t.state.clear(id);
          touched = true;
        }
      }
      if (toPatch.has(t.id)) {
        const local = identities.get([...t.subjects][0]!)!;
        for (const id of p.added) {
          const n = t.state.bucket(id).length;
          lowerLayer(t.layer, t.tiers, this.ctx(local, t.direction), t.state, id);
          if (n || t.state.bucket(id).length) touched = true;
        }
      }
      if (touched) updated++;
    }
    return updated;
  }

  private index(t: Table, add: boolean): void {
    for (const r of layerRules(t.tiers, t.layer)) {
      let s = this.ruleTables.get(r);
      if (add) {
        if (!s) this.ruleTables.set(r, (s = new Set()));
        s.add(t.id);
      } else if (s) {
        s.delete(t.id);
        if (s.size === 0) this.ruleTables.delete(r);
      }
    }
  }
}
