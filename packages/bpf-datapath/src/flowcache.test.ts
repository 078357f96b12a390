import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { flowCacheBytes, flowCacheSlots, possibleCpus, quantityBytes } from './flowcache.ts';

describe('the flow cache sized at load time', () => {
  it('the largest power of two of slots per CPU within the budget, from 256 to 16,384', () => {
    const MiB = 1 << 20;
    expect(flowCacheSlots(16 * MiB, 2)).toBe(16_384); // 1.75 MiB: today's size on a small node
    expect(flowCacheSlots(16 * MiB, 96)).toBe(2_048); // 10.5 MiB instead of 84 MiB
    expect(flowCacheBytes(2_048, 96)).toBeLessThanOrEqual(16 * MiB);
    expect(flowCacheSlots(1 * MiB, 512)).toBe(256); // never below 256, even over the budget
    expect(flowCacheSlots(2 ** 40, 1)).toBe(16_384);
  });

  it('reads the kernel CPU list and Kubernetes sizes', () => {
    const d = mkdtempSync(join(tmpdir(), 'cpus-'));
    for (const [text, n] of [
      ['0-95\n', 96],
      ['0\n', 1],
      ['0,2-3\n', 3],
    ] as const) {
      writeFileSync(join(d, 'possible'), text);
      expect(possibleCpus(join(d, 'possible'))).toBe(n);
    }
    writeFileSync(join(d, 'possible'), 'x\n');
    expect(() => possibleCpus(join(d, 'possible'))).toThrow(/not a CPU list/);
    expect(quantityBytes('16Mi')).toBe(16 << 20);
    expect(quantityBytes('2Gi')).toBe(2 * 2 ** 30);
    expect(quantityBytes('1048576')).toBe(1 << 20);
    for (const bad of ['16M', '-1', '1.5Mi', '', 'Mi']) expect(quantityBytes(bad)).toBeUndefined();
  });
});
