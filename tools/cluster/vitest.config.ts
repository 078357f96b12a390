import { defineConfig, mergeConfig } from 'vitest/config';
import { sharedConfig } from '../../vitest.shared.ts';

// the two end-to-end files each bring up a cluster on this machine: never at the same time, and each
// with its own module state (e2e/shared.ts's figures and network helpers)
export default mergeConfig(sharedConfig, defineConfig({ test: { fileParallelism: false, isolate: true } }));
