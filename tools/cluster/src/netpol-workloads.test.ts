import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EXAMPLE_PORTS, WORKLOADS_FILE, workloadsYaml } from './netpol-workloads.ts';

const ROOT = resolve(import.meta.dirname, '../../..');

describe('examples/netpol-cluster', () => {
  it('is current (node tools/cluster/src/netpol-workloads.ts writes it)', () => {
    expect(readFileSync(WORKLOADS_FILE, 'utf8')).toBe(workloadsYaml());
  });

  it("serves every port of the example's truth table", () => {
    const tables = JSON.parse(
      execFileSync(
        join(ROOT, 'node_modules/.bin/node'),
        [
          join(ROOT, 'packages/cascadectl/bin/cascadectl.js'),
          'netpol',
          'simulate',
          join(ROOT, 'examples/netpol'),
          '-o',
          'json',
        ],
        { encoding: 'utf8' },
      ),
    ) as { port: string }[];
    expect(tables.map((t) => Number(t.port.split('/')[1])).sort((a, b) => a - b)).toEqual(EXAMPLE_PORTS);
  });
});
