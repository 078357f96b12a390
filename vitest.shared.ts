// Shared vitest settings: every project writes a JSON result file that scripts/test-summary.ts sums up.
import { defineConfig } from 'vitest/config';

export const sharedConfig = defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    reporters: ['default', 'json'],
    outputFile: { json: '.vitest-results.json' },
    testTimeout: 60_000,
    pool: 'threads',
  },
});
