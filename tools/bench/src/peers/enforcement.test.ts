import { describe, expect, it } from 'vitest';
import { changeLatencies, enforcedAfter, firstVerdict, parseWatch, settled } from './enforcement.ts';

const lines = (rows: [number, number, string][]) => rows.map(([t, s, v]) => `${t} ${s} ${v}`).join('\n');

describe('reading enforcement off watch output', () => {
  it('parses attempts, ignoring anything else', () => {
    const a = parseWatch(
      'cli-0',
      `${lines([
        [0, 1700000000000, 'A'],
        [2, 1700000000010, 'D'],
      ])}\nnoise\n1 12 A\n`,
    );
    expect(a).toEqual([
      { pair: 'cli-0>0', start: 1700000000000, verdict: 'A' },
      { pair: 'cli-0>2', start: 1700000000010, verdict: 'D' },
    ]);
  });

  it('takes the first attempt after the last wrong one, per pair, out of order as decided', () => {
    const W = 1700000001000;
    // decided out of order: the denied attempts resolve after their timeout
    const a = parseWatch(
      'c',
      lines([
        [0, W + 20, 'A'],
        [0, W + 10, 'D'],
        [0, W + 30, 'A'],
        [0, W + 40, 'A'],
        [1, W + 10, 'D'],
        [1, W + 20, 'D'],
        [1, W + 30, 'A'],
        [1, W + 5, 'D'],
        [1, W - 5, 'A'], // before the write: not this change's
      ]),
    );
    const m = enforcedAfter(a, ['c>0', 'c>1'], W, W + 1000, true);
    expect(m.get('c>0')).toBe(20);
    expect(m.get('c>1')).toBe(30);
    expect(settled(a, ['c>0'], W, true)).toBe(true);
    expect(settled(a, ['c>0', 'c>1'], W, true)).toBe(false); // c>1 has one right attempt only
  });

  it('a flap after the right verdict moves the moment; a wrong last attempt is not enforced', () => {
    const W = 1700000002000;
    const a = parseWatch(
      'c',
      lines([
        [0, W + 10, 'R'],
        [0, W + 20, 'A'],
        [0, W + 30, 'D'],
        [0, W + 40, 'D'],
      ]),
    );
    expect(enforcedAfter(a, ['c>0'], W, W + 100, false).get('c>0')).toBe(30);
    expect(enforcedAfter(a, ['c>0'], W, W + 100, true).get('c>0')).toBeUndefined();
    expect(enforcedAfter(a, ['c>1'], W, W + 100, true).get('c>1')).toBeUndefined();
  });

  it("a new pod's first packets: wrong ones counted, time to the right verdict from its first attempt", () => {
    const T = 1700000003000;
    const a = parseWatch(
      'n',
      lines([
        [1, T, 'A'],
        [1, T + 10, 'A'],
        [1, T + 20, 'D'],
        [1, T + 30, 'D'],
      ]),
    );
    expect(firstVerdict(a, 'n>1', false)).toEqual({ wrong: 2, toRightMs: 20, attempts: 4 });
    expect(firstVerdict(a, 'n>1', true)).toEqual({ wrong: 2, toRightMs: undefined, attempts: 4 });
    expect(firstVerdict(a, 'n>0', true)).toEqual({ wrong: 0, toRightMs: undefined, attempts: 0 });
  });
});

describe('which changes count', () => {
  it('counts a change only when the one before it held: without enforcement nothing counts', () => {
    const W = 1700000004000;
    const pairs = ['c>0'];
    const writes = [
      { at: W, allow: false },
      { at: W + 100, allow: true },
      { at: W + 200, allow: false },
    ];
    const always = parseWatch(
      'c',
      lines(Array.from({ length: 30 }, (_, i) => [0, W + i * 10, 'A'] as [number, number, string])),
    );
    expect(changeLatencies(always, pairs, writes, 1000)).toEqual([undefined, undefined, undefined]);
    const enforcing = parseWatch(
      'c',
      lines([
        [0, W + 10, 'A'],
        [0, W + 30, 'D'],
        [0, W + 90, 'D'],
        [0, W + 110, 'D'],
        [0, W + 150, 'A'],
        [0, W + 210, 'A'],
        [0, W + 250, 'D'],
      ]),
    );
    expect(changeLatencies(enforcing, pairs, writes, 1000)).toEqual([30, 50, 50]);
    expect(changeLatencies(enforcing, pairs, writes, 40)).toEqual([30, undefined, undefined]);
  });
});
