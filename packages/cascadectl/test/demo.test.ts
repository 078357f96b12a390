// The demo itself, from a temporary copy of the repository's examples, checked for its key lines.

import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../../..');

describe('npm run demo', () => {
  it('prints effective policies, status, the truth table, maps and kernel verdicts', () => {
    const copy = mkdtempSync(join(tmpdir(), 'cascade-demo-'));
    for (const d of ['examples', 'packages', 'tools', 'node_modules', 'package.json', 'tsconfig.base.json'])
      cpSync(join(root, d), join(copy, d), {
        recursive: true,
        verbatimSymlinks: true,
        filter: (s) => !s.includes('/.nx/'),
      });
    const r = spawnSync(process.execPath, [join(copy, 'packages/cascadectl/src/demo.ts')], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(r.status, r.stderr).toBe(0);
    for (const line of [
      '== Effective auth and rate-limit policies, per path',
      'limits.per-user  infra/platform-cap     override',
      'unset of authorization.deny-anonymous refused: an override of infra/platform-auth cannot be unset',
      '== Network policy truth table',
      'monitoring/prometheus  payments/ledger  TCP/9090    ALLOW',
      '== BPF maps (lowered MapState, shared layers)',
      '== Downstream configuration the controllers publish',
      'AuthConfig  infra/orders-main-',
      "name: 'per-user[1] from RateLimitPolicy infra/platform-cap (override), scope route'",
      '5 endpoints,',
      '== Token limits: a streamed completion on the AI gateway, counted in tokens',
      "hits: 814 (usage read from the stream's event 3 of 4)",
      'with 9500 already counted the counter holds 10314, so the next request gets 429',
    ]) {
      expect(r.stdout).toContain(line);
    }
    if (process.getuid?.() === 0) expect(r.stdout).toMatch(/13\/13 probes agree/);
    expect(r.stdout).toContain('== Pictures');
    expect(r.stderr).toMatch(
      /wrote .*out\/gateway\.svg \(\d+x\d+: 9 policy attachments, 14 effective rules and refused unsets\)/,
    );
    expect(r.stderr).toMatch(/wrote .*out\/netpol\.svg \(\d+x\d+: 25 grid cells\)/);
    expect(readFileSync(join(copy, 'out/gateway.svg'), 'utf8')).toMatch(/^<svg /);
    expect(r.stdout).toMatch(/demo finished in \d+\.\d s/);
  }, 150_000);
});
