// PodAddressSlices: the controller's plan (grouping, capacity, stickiness, scale-down, determinism)
// and the agent's index (events in any order, its own node left out), and the property that matters:
// an agent fed its node's pods and the slices computes exactly what an agent watching every Pod does.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AddressOwners } from '../cluster/owners.ts';
import {
  addressSliceFromObject,
  MAX_PODS_PER_SLICE,
  SLICES_PUBLISHED,
  SliceIndex,
  type SliceSpec,
} from '../cluster/slices.ts';
import { NetpolEngine } from '../engine/engine.ts';
import type { Pod } from '../engine/model.ts';
import { clusterArb } from '../engine/testing.ts';
import { planSlices, SlicePlanner } from './slice-plan.ts';

const pod = (
  ns: string,
  name: string,
  labels: Record<string, string>,
  ip: string,
  extra: Partial<Pod> = {},
): Pod => ({
  namespace: ns,
  name,
  labels,
  ips: [ip],
  ports: [],
  node: 'n2',
  ...extra,
});
const many = (n: number, labels = { app: 'web' }, ns = 'shop') =>
  Array.from({ length: n }, (_, i) =>
    pod(ns, `web-${String(i).padStart(4, '0')}`, labels, `10.0.${i >> 8}.${i & 255}`),
  );

/** What a controller writes going from `live` to `plan`: changed or new slices, and deleted ones. */
function writes(live: Map<string, SliceSpec>, plan: Map<string, SliceSpec>): number {
  let n = 0;
  for (const [k, s] of plan) if (JSON.stringify(live.get(k)) !== JSON.stringify(s)) n++;
  for (const k of live.keys()) if (!plan.has(k)) n++;
  return n;
}

describe('planSlices', () => {
  it('groups pods by namespace, label set and named ports, at most 100 per slice, names without tenant text', () => {
    const pods = [
      ...many(250),
      pod('shop', 'db-0', { app: 'db' }, '10.1.0.1', {
        ports: [{ name: 'pg', port: 5432, protocol: 'TCP' }],
      }),
      pod('shop', 'db-1', { app: 'db' }, '10.1.0.2', {
        ports: [
          { name: 'pg', port: 5432, protocol: 'TCP' },
          { port: 9187, protocol: 'TCP' },
        ],
      }),
      pod('shop', 'db-2', { app: 'db' }, '10.1.0.3', {
        ports: [{ name: 'pg', port: 5433, protocol: 'TCP' }],
      }),
      pod('other', 'web-0', { app: 'web' }, '10.2.0.1'),
      pod('shop', 'pending', { app: 'web' }, '10.3.0.1', { ips: [] }),
    ];
    const plan = planSlices(new Map(), pods);
    const sizes = [...plan.values()].map(
      (s) => `${s.namespace} ${JSON.stringify(s.labels)} ${s.pods.length}`,
    );
    expect(sizes.sort()).toEqual([
      'other {"app":"web"} 1',
      'shop {"app":"db"} 1', // pg on 5433: another identity
      'shop {"app":"db"} 2', // the unnamed port does not matter
      'shop {"app":"web"} 100',
      'shop {"app":"web"} 100',
      'shop {"app":"web"} 50',
    ]);
    for (const n of plan.keys()) expect(n).toMatch(/^pas-[0-9a-f]{16}-\d+$/);
    const db = [...plan.values()].find((s) => s.pods.some((p) => p.name === 'db-1'))!;
    expect(db.ports).toEqual([{ name: 'pg', port: 5432, protocol: 'TCP' }]);
    expect(db.pods[0]).toEqual({ name: 'db-0', node: 'n2', ips: ['10.1.0.1'] });
    expect(addressSliceFromObject({ metadata: { name: 'x' }, spec: db })).toEqual(db);
  });

  it('is sticky: the same pods plan the same slices (0 writes); one address change writes one slice', () => {
    const pods = many(250);
    const first = planSlices(new Map(), pods);
    expect(writes(first, planSlices(first, pods))).toBe(0);
    expect(writes(first, planSlices(first, [...pods].reverse()))).toBe(0);
    const moved = pods.map((p) => (p.name === 'web-0123' ? { ...p, ips: ['10.9.9.9'] } : p));
    expect(writes(first, planSlices(first, moved))).toBe(1);
  });

  it('a new pod fills a slice with room; a relabelled pod leaves its slice for its new group', () => {
    const pods = many(150);
    const first = planSlices(new Map(), pods);
    const grown = planSlices(first, [...pods, pod('shop', 'web-9999', { app: 'web' }, '10.8.0.1')]);
    expect(writes(first, grown)).toBe(1);
    expect(grown.size).toBe(2);
    const relabelled = pods.map((p) =>
      p.name === 'web-0001' ? { ...p, labels: { app: 'web', canary: 'yes' } } : p,
    );
    const next = planSlices(first, relabelled);
    expect(writes(first, next)).toBe(2); // out of one, into a new one
    const canary = [...next.values()].find((s) => s.labels.canary === 'yes')!;
    expect(canary.pods.map((p) => p.name)).toEqual(['web-0001']);
    expect([...next.values()].filter((s) => s.pods.some((p) => p.name === 'web-0001'))).toHaveLength(1);
  });

  it('deletes empty slices and merges a quarter-full one into its group on scale-down', () => {
    const pods = many(300);
    const first = planSlices(new Map(), pods);
    expect(first.size).toBe(3);
    // down to 120 pods: the slices keep 100, 20 and 0; the empty one goes, the 20 stay (no room)
    const at120 = planSlices(first, pods.slice(0, 120));
    expect([...at120.values()].map((s) => s.pods.length).sort((a, b) => a - b)).toEqual([20, 100]);
    expect(writes(first, at120)).toBe(2);
    // 30 more of the first slice's pods go: the quarter-full slice moves into it (2 writes)
    const merged = planSlices(at120, [...pods.slice(0, 70), ...pods.slice(100, 120)]);
    expect([...merged.values()].map((s) => s.pods.length)).toEqual([90]);
    expect(writes(at120, merged)).toBe(2);
    expect(planSlices(first, []).size).toBe(0);
  });

  it('plans the same from scratch whatever order the pods come in (a new leader)', () => {
    const pods = [...many(230), ...many(40, { app: 'db' }, 'data')];
    const a = planSlices(new Map(), pods);
    const b = planSlices(
      new Map(),
      [...pods].sort(() => 0.5 - Math.random()),
    );
    expect(JSON.stringify([...b].sort())).toBe(JSON.stringify([...a].sort()));
  });

  it('never exceeds the capacity, even when the live slices hold more (a smaller maximum)', () => {
    const first = planSlices(new Map(), many(100));
    const smaller = planSlices(first, many(100), 30);
    for (const s of smaller.values()) expect(s.pods.length).toBeLessThanOrEqual(30);
    expect([...smaller.values()].reduce((n, s) => n + s.pods.length, 0)).toBe(100);
    expect(MAX_PODS_PER_SLICE).toBe(100);
  });
});

describe('addressSliceFromObject', () => {
  const ok: SliceSpec = {
    namespace: 'shop',
    labels: { app: 'web' },
    pods: [{ name: 'a', ips: ['10.0.0.1'] }],
  };
  it.each([
    [{ ...ok, pods: [{ name: 'a', ips: ['10.0.0.300'] }] }, /spec.pods.0.ips: not an address: 10.0.0.300/],
    [{ ...ok, pods: [{ name: 'a', ips: [] }] }, /spec.pods.0.ips/],
    [{ ...ok, pods: many(101).map((p) => ({ name: p.name, ips: p.ips })) }, /spec.pods/],
    [{ ...ok, namespace: '' }, /spec.namespace/],
    [{ ...ok, ports: [{ name: 'http', port: 70000, protocol: 'TCP' }] }, /spec.ports.0.port/],
    [undefined, /spec/],
  ])('refuses %#', (spec, msg) => {
    const r = addressSliceFromObject({ metadata: { name: 'x' }, spec });
    expect('error' in r && r.error).toMatch(msg);
  });
});

describe('SliceIndex', () => {
  const spec = (labels: Record<string, string>, pods: SliceSpec['pods']): SliceSpec => ({
    namespace: 'shop',
    labels,
    pods,
  });
  it('keeps a pod moving between slices whatever order the two events come in', () => {
    for (const order of [
      ['add', 'remove'],
      ['remove', 'add'],
    ]) {
      const ix = new SliceIndex();
      ix.apply('a', spec({ app: 'web' }, [{ name: 'p', ips: ['10.0.0.1'], node: 'n2' }]));
      expect(ix.get('shop/p')?.labels).toEqual({ app: 'web' });
      for (const step of order)
        if (step === 'add')
          ix.apply('b', spec({ app: 'web', v: '2' }, [{ name: 'p', ips: ['10.0.0.1'], node: 'n2' }]));
        else ix.apply('a', undefined);
      expect(ix.get('shop/p')?.labels).toEqual({ app: 'web', v: '2' });
      expect(ix.size).toBe(1);
    }
  });

  it("keeps every node's pods, its own included, and reports only pods that changed", () => {
    const ix = new SliceIndex();
    const s = spec({ app: 'web' }, [
      { name: 'mine', ips: ['10.0.0.1'], node: 'n1' },
      { name: 'theirs', ips: ['10.0.0.2'], node: 'n2' },
    ]);
    expect(ix.apply('a', s)).toEqual(['shop/mine', 'shop/theirs']);
    expect(ix.get('shop/mine')).toMatchObject({ node: 'n1', ips: ['10.0.0.1'] });
    expect(ix.apply('a', structuredClone(s))).toEqual([]);
    expect(ix.apply('a', spec({ app: 'web' }, [{ name: 'theirs', ips: ['10.0.0.3'], node: 'n2' }]))).toEqual([
      'shop/mine',
      'shop/theirs',
    ]);
    expect(ix.apply('a', undefined)).toEqual(['shop/theirs']);
    expect(ix.size).toBe(0);
  });

  it("notes the controller's marker (no pods), and keeps it noted if the marker goes", () => {
    const ix = new SliceIndex();
    expect(ix.published).toBe(false);
    expect(ix.apply(SLICES_PUBLISHED, { namespace: 'cascade-system', labels: {}, pods: [] })).toEqual([]);
    expect(ix.published).toBe(true);
    ix.apply(SLICES_PUBLISHED, undefined);
    expect(ix.published).toBe(true);
    expect(ix.size).toBe(0);
  });
});

/** The pods an engine gets after address ownership (as the agent feeds it). */
function owned(pods: Iterable<Pod>): Pod[] {
  const o = new AddressOwners();
  const list = [...pods];
  for (const p of list) o.claim(`${p.namespace}/${p.name}`, p);
  return list.flatMap((p) => o.owned(`${p.namespace}/${p.name}`) ?? []);
}

function canonical(e: NetpolEngine): string[] {
  const name = (id: number) => (id < 256 ? `reserved:${id}` : (e.identities.get(id)?.key ?? `missing:${id}`));
  const out: string[] = [];
  for (const [k, p] of e.pods)
    for (const d of ['ingress', 'egress'] as const) {
      const t = e.tableOf(p.namespace, p.name, d);
      for (const layer of ['admin', 'lower'] as const)
        for (const x of t?.[layer].state.entries() ?? [])
          out.push(
            `${k}|${d}|${layer}|${name(x.identity)}|${x.proto}|${x.port}/${x.plen}|${x.precedence}|${x.verdict}`,
          );
    }
  return out.sort();
}

describe('an agent fed by slices', () => {
  it('computes what an agent watching every Pod computes (any cluster, any slice order)', () => {
    fc.assert(
      fc.property(clusterArb, fc.integer({ min: 1, max: 4 }), fc.nat(), (c, max, seed) => {
        const full = NetpolEngine.fromCluster({ ...c, pods: owned(c.pods) });
        const plan = planSlices(new Map(), c.pods, max);
        const ix = new SliceIndex();
        const names = [...plan.keys()];
        // the slice events in a seeded shuffled order
        for (let i = names.length - 1; i > 0; i--) {
          const j = (seed + i * 7) % (i + 1);
          [names[i], names[j]] = [names[j]!, names[i]!];
        }
        for (const n of names) ix.apply(n, plan.get(n));
        const keys = new Set([...c.pods.map((p) => `${p.namespace}/${p.name}`)]);
        const fed = [...keys].flatMap((k) => ix.get(k) ?? []);
        const sliced = NetpolEngine.fromCluster({ ...c, pods: owned(fed) });
        expect(canonical(sliced)).toEqual(canonical(full));
      }),
      { numRuns: 60 },
    );
  });
});

describe('SlicePlanner (incremental)', () => {
  type Step = { pod: number; op: 'set' | 'delete'; app: string; ip: number; node: string };
  const step: fc.Arbitrary<Step> = fc.record({
    pod: fc.nat(40),
    op: fc.constantFrom('set' as const, 'set' as const, 'delete' as const),
    app: fc.constantFrom('web', 'db', 'api'),
    ip: fc.nat(3),
    node: fc.constantFrom('n1', 'n2', 'n3'),
  });
  it('after every change: equals a full pass from the previous slices, its changes turn the old slices into the new, every pod once', () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 80 }), fc.integer({ min: 1, max: 5 }), (steps, max) => {
        const planner = new SlicePlanner(max);
        const pods = new Map<string, Pod>();
        let live = new Map<string, SliceSpec>();
        for (const s of steps) {
          const name = `p${s.pod}`;
          const key = `shop/${name}`;
          if (s.op === 'delete') pods.delete(key);
          else pods.set(key, pod('shop', name, { app: s.app }, `10.0.${s.pod}.${s.ip}`, { node: s.node }));
          planner.update(key, pods.get(key));
          const changes = planner.flush();
          const full = planSlices(live, pods.values(), max);
          const next = new Map(live);
          for (const [n, spec] of changes) spec ? next.set(n, spec) : next.delete(n);
          expect(JSON.stringify([...next].sort())).toBe(JSON.stringify([...planner.specs()].sort()));
          expect(JSON.stringify([...full].sort())).toBe(JSON.stringify([...planner.specs()].sort()));
          const seen = new Set<string>();
          for (const spec of next.values()) {
            expect(spec.pods.length).toBeGreaterThan(0);
            expect(spec.pods.length).toBeLessThanOrEqual(max);
            for (const e of spec.pods) {
              const p = pods.get(`shop/${e.name}`)!;
              expect(p.labels).toEqual(spec.labels);
              expect(seen.has(e.name)).toBe(false);
              seen.add(e.name);
            }
          }
          expect(seen.size).toBe(pods.size);
          live = next;
        }
      }),
      { numRuns: 150 },
    );
  });
});
