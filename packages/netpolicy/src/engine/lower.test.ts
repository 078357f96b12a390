// lowerLayer over synthetic selections: the per-identity recording and bucket sharing at sizes the
// scenario and property tests do not reach.
import { describe, expect, it } from 'vitest';
import { ID, type IdentityInfo } from './identities.ts';
import { type LowerContext, lowerLayer } from './lower.ts';
import type { Rule } from './rules.ts';
import type { Selection } from './selection.ts';
import type { TieredRules } from './tiers.ts';

const rule = (id: string, action: Rule['action'], port: number): Rule =>
  ({
    id,
    action,
    peers: [{ kind: 'pods' }],
    ports: [{ kind: 'range', proto: 6, range: { start: port, end: port } }],
  }) as unknown as Rule;

function context(selections: Map<Rule, Selection>): LowerContext {
  const local = { id: 256, kind: 'pod', key: 'local' } as IdentityInfo;
  return {
    direction: 'ingress',
    local,
    identities: new Map([[256, local]]),
    byPortName: new Map(),
    select: (r) => selections.get(r)!,
  };
}

describe('lowerLayer recording and sharing', () => {
  it('one rule selecting 150,000 identities at once (more than twice the scratch): every one gets its entry', () => {
    const ids = new Set(Array.from({ length: 150_000 }, (_, i) => 1000 + i));
    const r = rule('ANP/big#ingress[0]', 'deny', 443);
    const t: TieredRules = { admin: [r], isolation: [], np: [], baseline: [] };
    const m = lowerLayer('admin', t, context(new Map([[r, { kind: 'set', ids }]])));
    expect(m.size).toBe(150_000);
    expect(m.lookup(1000, 6, 443)).toMatchObject({ identity: 1000, verdict: 'deny' });
    expect(m.lookup(150_999, 6, 443)).toMatchObject({ identity: 150_999, verdict: 'deny' });
    expect(m.lookup(150_999, 6, 80)).toBeUndefined();
  });

  it('overlapping selections: identities share a bucket only when the same rules selected them', () => {
    const a = rule('ANP/a#ingress[0]', 'allow', 80);
    const b = rule('ANP/b#ingress[0]', 'deny', 81);
    const selections = new Map<Rule, Selection>([
      [a, { kind: 'set', ids: new Set([300, 301, 302]) }],
      [b, { kind: 'set', ids: new Set([301, 302, 303]) }],
    ]);
    const t: TieredRules = { admin: [a, b], isolation: [], np: [], baseline: [] };
    const m = lowerLayer('admin', t, context(selections));
    const ports = (id: number) => m.bucket(id).map((e) => e.port);
    expect(ports(300)).toEqual([80]);
    expect(ports(301)).toEqual([80, 81]);
    expect(m.bucket(302)).toBe(m.bucket(301)); // shared
    expect(ports(303)).toEqual([81]);
    expect(m.sorted().map((e) => `${e.identity}/${e.port}`)).toEqual([
      '300/80',
      '301/80',
      '301/81',
      '302/80',
      '302/81',
      '303/81',
    ]);
    // a pod identity and a non-pod one (a CIDR) never share: their parents differ
    const cidr = 0x02000000;
    const c = rule('ANP/c#ingress[0]', 'allow', 22);
    const m2 = lowerLayer(
      'admin',
      { admin: [c], isolation: [], np: [], baseline: [] },
      context(new Map([[c, { kind: 'set', ids: new Set([300, cidr]) }]])),
    );
    expect(m2.bucket(cidr)).not.toBe(m2.bucket(300));
    expect(m2.lookup(cidr, 6, 22)).toMatchObject({ identity: cidr });
    expect(ID.ALL_PODS).toBe(3);
  });
});
