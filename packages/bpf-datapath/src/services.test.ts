// The loader's Service bookkeeping without a kernel: a fake of the map operations records writes.
import { describe, expect, it } from 'vitest';
import {
  type DesiredService,
  MAX_BACKEND_SLOTS,
  MAX_FRONTENDS,
  type MapOps,
  ServiceState,
} from './services.ts';

function fakeMaps() {
  const maps = new Map<string, Map<string, string>>();
  const writes = { count: 0 };
  const m = (name: string) => {
    let x = maps.get(name);
    if (!x) maps.set(name, (x = new Map()));
    return x;
  };
  const ops: MapOps = {
    updates: async (map, pairs) => {
      writes.count += pairs.length;
      for (const [k, v] of pairs) m(map).set(k, v);
    },
    deletes: async (map, keys) => {
      for (const k of keys) m(map).delete(k);
    },
    dump: async (map) => [...m(map)].map(([k, v]) => [Buffer.from(k, 'hex'), Buffer.from(v, 'hex')]),
  };
  return { ops, m, writes };
}

const ip = (i: number) => `10.96.${(i >> 8) & 255}.${i & 255}`;

describe('ServiceState (the loader side of the Service maps)', () => {
  it('the same desired array again writes and reads nothing; an equal new one writes nothing', async () => {
    const { ops, writes } = fakeMaps();
    const st = new ServiceState();
    const desired: DesiredService[] = [
      { addr: ip(1), port: 80, proto: 6, backends: [{ addr: '10.244.0.5', port: 8080 }] },
    ];
    await st.sync(desired, ops);
    const after = writes.count;
    expect(after).toBe(2);
    expect(await st.sync(desired, ops)).toMatchObject({ frontendsWritten: 0, backendsWritten: 0 });
    expect(await st.sync([{ ...desired[0]! }], ops)).toMatchObject({
      frontendsWritten: 0,
      backendsWritten: 0,
    });
    expect(writes.count).toBe(after);
  });

  it('tenants cannot fill the maps: frontends past the bounds are left out and reported, the rest written', async () => {
    const { ops, m } = fakeMaps();
    const many: DesiredService[] = Array.from({ length: MAX_FRONTENDS + 3 }, (_, i) => ({
      addr: ip(i),
      port: 80 + (i >> 16),
      proto: 6,
      name: `ns/s${i}:http`,
      backends: [{ addr: '10.244.0.5', port: 8080 }],
    }));
    const r = await new ServiceState().sync(many, ops);
    expect(r.frontendsWritten).toBe(MAX_FRONTENDS);
    expect(r.cut).toEqual(
      [MAX_FRONTENDS, MAX_FRONTENDS + 1, MAX_FRONTENDS + 2].map(
        (i) => `ns/s${i}:http (left out: the Service maps are full)`,
      ),
    );
    expect(m('cascade_services').size).toBe(MAX_FRONTENDS);
    const wide: DesiredService[] = Array.from({ length: 40 }, (_, i) => ({
      addr: ip(i),
      port: 443,
      proto: 6,
      name: `ns/w${i}:https`,
      backends: Array.from({ length: 4096 }, (_, j) => ({
        addr: `10.${100 + (j >> 8)}.${j & 255}.${i}`,
        port: 8443,
      })),
    }));
    const w = await new ServiceState().sync(wide, fakeMaps().ops);
    expect(w.backendsWritten).toBeLessThanOrEqual(MAX_BACKEND_SLOTS);
    expect(w.backendsWritten).toBe(32 * 4096);
    expect(w.cut).toHaveLength(8);
  });
});
