import { describe, expect, it } from 'vitest';
import { MapState, type MapStateEntry } from './mapstate.ts';

const entry = (identity: number, port: number, precedence: number, verdict: 'allow' | 'deny' = 'allow') =>
  ({
    identity,
    proto: 6,
    port,
    plen: 16,
    precedence,
    verdict,
    deny: verdict === 'deny',
    rule: `r${port}`,
  }) satisfies MapStateEntry;

describe('MapState shared buckets', () => {
  it('an identity sharing another one’s bucket reads back with its own identity everywhere', () => {
    const m = new MapState();
    m.insert(entry(300, 80, 10));
    m.insert(entry(300, 443, 9, 'deny'));
    m.share(m.bucket(300), [301]);
    expect(m.size).toBe(4);
    expect(m.sorted().map((e) => `${e.identity}/${e.port}/${e.verdict}`)).toEqual([
      '300/80/allow',
      '300/443/deny',
      '301/80/allow',
      '301/443/deny',
    ]);
    expect(m.lookup(301, 6, 443)).toMatchObject({ identity: 301, verdict: 'deny' });
    expect(m.lookup(300, 6, 80)).toMatchObject({ identity: 300 });
  });

  it('changing a shared bucket copies it first: the other identity keeps its entries', () => {
    const m = new MapState();
    m.insert(entry(300, 80, 10));
    m.share(m.bucket(300), [301]);
    m.insert(entry(301, 8080, 5));
    expect(m.bucket(300).map((e) => e.port)).toEqual([80]);
    expect(m.bucket(301).map((e) => [e.identity, e.port])).toEqual([
      [301, 80],
      [301, 8080],
    ]);
    // and the other way round
    m.share(m.bucket(300), [302]);
    m.insert(entry(300, 22, 11, 'deny'));
    expect(m.bucket(302).map((e) => e.port)).toEqual([80]);
    expect(m.size).toBe(1 + 1 + 2 + 1);
  });

  it('clearing or re-sharing an identity keeps the count right and never touches the owner', () => {
    const m = new MapState();
    m.insert(entry(300, 80, 10));
    m.insert(entry(400, 53, 10));
    m.share(m.bucket(300), [301]);
    m.share(m.bucket(400), [301]);
    expect(m.size).toBe(3);
    expect(m.lookup(301, 6, 53)).toMatchObject({ identity: 301, port: 53 });
    m.clear(301);
    expect(m.size).toBe(2);
    expect(m.bucket(300)).toHaveLength(1);
    expect(() => m.share([], [302])).toThrow(/empty/);
  });
});
