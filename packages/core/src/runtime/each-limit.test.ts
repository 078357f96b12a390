import { describe, expect, it } from 'vitest';
import { eachLimit } from './controller.ts';

describe('eachLimit', () => {
  it('runs every item with at most n in flight', async () => {
    let inFlight = 0;
    let peak = 0;
    const done: number[] = [];
    await eachLimit(
      Array.from({ length: 50 }, (_, i) => i),
      4,
      async (i) => {
        peak = Math.max(peak, ++inFlight);
        await new Promise((r) => setTimeout(r, i % 3));
        inFlight--;
        done.push(i);
      },
    );
    expect(peak).toBe(4);
    expect(done.sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, i) => i));
  });

  it('stops taking new items after a failure and throws it once in-flight work ends', async () => {
    const started: number[] = [];
    await expect(
      eachLimit([1, 2, 3, 4, 5, 6, 7, 8], 2, async (i) => {
        started.push(i);
        await new Promise((r) => setTimeout(r, 1));
        if (i === 2) throw new Error('boom 2');
      }),
    ).rejects.toThrow('boom 2');
    expect(started.length).toBeLessThan(8);
  });
});
