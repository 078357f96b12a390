// The README's walk-through is what the commands print today (regenerate it with
// `node packages/cascadectl/src/walkthrough.ts --write`).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { README, readmeWith, renderWalkthrough } from '../src/walkthrough.ts';

describe('README walk-through', () => {
  it('shows the real output of every command', () => {
    expect(readFileSync(README, 'utf8')).toBe(readmeWith(renderWalkthrough()));
  }, 60_000);
});
