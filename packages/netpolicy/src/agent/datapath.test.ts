// A node's desired datapath state with staged objects: the endpoints whose staged tables differ carry
// them, their tables are in the state, and the node's staged budget leaves pods out (never an
// enforced table).
import { describe, expect, it } from 'vitest';
import { NetpolEngine } from '../engine/engine.ts';
import { shopCluster, shopPod } from '../engine/testing.ts';
import { datapathState } from './datapath.ts';

const engine = () => {
  const e = NetpolEngine.fromCluster(
    shopCluster(
      [],
      [shopPod('shop', 'web', { app: 'web' }, '10.1.0.1'), shopPod('shop', 'db', { app: 'db' }, '10.1.0.2')],
    ),
  );
  e.upsertStaged({
    kind: 'StagedNetworkPolicy',
    action: 'Set',
    policy: {
      kind: 'NetworkPolicy',
      namespace: 'shop',
      name: 'db-lockdown',
      spec: { podSelector: { matchLabels: { app: 'db' } }, policyTypes: ['Ingress'] },
    },
  });
  e.flush();
  return e;
};

describe('datapathState with staged policies', () => {
  it('gives the staged tables to the pods they change, and their entries to the state', () => {
    const s = datapathState(engine());
    const db = s.endpoints.find((x) => x.ip === '10.1.0.2')!;
    const web = s.endpoints.find((x) => x.ip === '10.1.0.1')!;
    expect(web.staged).toBeUndefined();
    expect(db.staged).toBeDefined();
    expect(db.staged!.ingress.lower).not.toBe(db.tables.ingress.lower);
    expect(s.tables.get(db.staged!.ingress.lower)!.some((t) => t.verdict === 'deny')).toBe(true);
    expect(s.stagedLeftOut).toEqual([]);
  });

  it("leaves pods out past the node's staged budget, and only their staged part", () => {
    const s = datapathState(engine(), undefined, { stagedEntryBudget: 0 });
    const db = s.endpoints.find((x) => x.ip === '10.1.0.2')!;
    expect(db.staged).toBeUndefined();
    expect(s.stagedLeftOut).toEqual(['shop/db']);
    expect(s.tables.has(db.tables.ingress.lower)).toBe(true);
  });
});
