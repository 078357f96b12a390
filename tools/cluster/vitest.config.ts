import { defineConfig, mergeConfig } from 'vitest/config';
import { sharedConfig } from '../../vitest.shared.ts';

// the two end-to-end files each bring up a cluster on this machine: never at the same time
export default mergeConfig(sharedConfig, defineConfig({ test: { fileParallelism: false } }));
