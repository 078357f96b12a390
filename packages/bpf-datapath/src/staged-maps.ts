// The staged tables of the node's endpoints (cascade_staged, struct staged_value): which rule-set
// tables the staged set (netpolicy staged-view.ts) would judge an endpoint's new flows by. The
// tables themselves are ordinary policy tables (content-addressed, shared with the enforced ones); an
// endpoint holds a staged entry and the flag EP_STAGED only while its staged tables differ from its
// enforced ones. Written before the endpoints that set the flag, pruned after the endpoints that drop
// it: the program looks an endpoint's entry up only with the flag, and without an entry judges as
// if it had none, so no order shows a packet anything but the enforced verdict.
import { decodeStagedValue, encodeStagedValue } from './codecs.ts';
import type { MapOps } from './services.ts';

type Ids = [[number, number], [number, number]];
const hex = (b: Buffer) => b.toString('hex');
const same = (a: Ids, b: Ids) =>
  a[0][0] === b[0][0] && a[0][1] === b[0][1] && a[1][0] === b[1][0] && a[1][1] === b[1][1];

type StagedMapOps = MapOps;

export class StagedState {
  /** endpoint key hex -> staged table ids as in the kernel */
  private entries = new Map<string, Ids>();

  async readBack(ops: StagedMapOps): Promise<void> {
    this.entries = new Map(
      (await ops.dump('cascade_staged')).map(([k, v]) => [hex(k), decodeStagedValue(v)]),
    );
  }

  /** Table ids the staged entries use (never freed while they do). */
  inUse(): number[] {
    return [...this.entries.values()].flatMap((t) => t.flat());
  }

  /** Writes the entries that are new or changed (before the endpoints take the flag). */
  async write(ops: StagedMapOps, want: ReadonlyMap<string, Ids>): Promise<number> {
    const writes: [string, string][] = [];
    for (const [k, ids] of want) {
      const prev = this.entries.get(k);
      if (!prev || !same(prev, ids)) writes.push([k, hex(encodeStagedValue(ids))]);
    }
    await ops.updates('cascade_staged', writes);
    for (const [k, ids] of want) this.entries.set(k, ids);
    return writes.length;
  }

  /** Deletes the entries of endpoints without staged tables now (after they dropped the flag). */
  async prune(ops: StagedMapOps, want: ReadonlyMap<string, Ids>): Promise<number> {
    const gone = [...this.entries.keys()].filter((k) => !want.has(k));
    await ops.deletes('cascade_staged', gone);
    for (const k of gone) this.entries.delete(k);
    return gone.length;
  }
}
