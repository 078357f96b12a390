// The bundle `bin/cascadectl.js` runs when it is current (scripts/setup.d/15-cli.sh builds it): one
// file instead of hundreds of TypeScript modules to resolve and strip, and the Kubernetes client in a
// chunk of its own that only live commands (--kubeconfig, netpol maps --node, cleanup) load.
// Packages under node_modules are taken as free of side effects, so what the CLI does not use is left
// out; Cascade's own modules keep theirs (they register kinds).
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

export default {
  input: join(here, 'src', 'main.ts'),
  platform: 'node',
  // Node's built-in modules are taken as free of side effects too: an import kept only for its side
  // effects (of a module the CLI does not call, such as the health server's node:http) costs 50 ms
  treeshake: { moduleSideEffects: (id, external) => !external && !id.includes('/node_modules/') },
  output: {
    dir: join(here, 'dist'),
    format: 'esm',
    entryFileNames: 'cascadectl.mjs',
    chunkFileNames: '[name]-[hash].mjs',
  },
};
