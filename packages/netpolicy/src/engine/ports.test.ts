import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { mergeRanges, portInPrefix, prefixContains, rangeToPrefixes } from './ports.ts';

describe('port ranges to prefixes', () => {
  it('covers exactly the range with the fewest aligned prefixes', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 65535 }), fc.integer({ min: 0, max: 65535 }), (a, b) => {
        const r = { start: Math.min(a, b), end: Math.max(a, b) };
        const ps = rangeToPrefixes(r);
        expect(ps.length).toBeLessThanOrEqual(30);
        for (const port of [r.start, r.end, r.start - 1, r.end + 1, (r.start + r.end) >> 1]) {
          if (port < 0 || port > 65535) continue;
          const inside = port >= r.start && port <= r.end;
          expect(ps.filter((p) => portInPrefix(port, p)).length).toBe(inside ? 1 : 0);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it.each([
    [{ start: 0, end: 65535 }, [{ port: 0, len: 0 }]],
    [{ start: 80, end: 80 }, [{ port: 80, len: 16 }]],
    [{ start: 65535, end: 65535 }, [{ port: 65535, len: 16 }]],
    [{ start: 0, end: 0 }, [{ port: 0, len: 16 }]],
    [{ start: 8080, end: 8087 }, [{ port: 8080, len: 13 }]],
  ])('%j', (r, want) => expect(rangeToPrefixes(r)).toEqual(want));

  it('1-65535 needs 16 prefixes (within the 30 bound)', () => {
    expect(rangeToPrefixes({ start: 1, end: 65535 })).toHaveLength(16);
    expect(rangeToPrefixes({ start: 1, end: 65534 })).toHaveLength(30);
  });

  it('merges adjacent and overlapping ranges first', () => {
    expect(
      mergeRanges([
        { start: 10, end: 20 },
        { start: 1, end: 9 },
        { start: 15, end: 30 },
        { start: 40, end: 41 },
      ]),
    ).toEqual([
      { start: 1, end: 30 },
      { start: 40, end: 41 },
    ]);
  });

  it('prefix containment', () => {
    expect(prefixContains({ port: 0, len: 0 }, { port: 80, len: 16 })).toBe(true);
    expect(prefixContains({ port: 8080, len: 13 }, { port: 8081, len: 16 })).toBe(true);
    expect(prefixContains({ port: 8080, len: 13 }, { port: 8088, len: 16 })).toBe(false);
    expect(prefixContains({ port: 80, len: 16 }, { port: 80, len: 13 })).toBe(false);
  });
});
