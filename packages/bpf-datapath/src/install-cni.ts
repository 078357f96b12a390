// Copies the cascade-cni chaining plugin (a static binary) into the node's CNI binary directory:
// the agent DaemonSet's init container. Atomic (a temporary file renamed over the old one), so a
// runtime calling the plugin meanwhile runs either the old or the new one, never half of one.
//   node install-cni.ts [DIR]   (default $CNI_BIN_DIR or /opt/cni/bin)
import { chmodSync, copyFileSync, mkdirSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { ARTIFACTS } from './artifacts.ts';

export function installCni(dir: string): string {
  mkdirSync(dir, { recursive: true });
  const target = join(dir, 'cascade-cni');
  const tmp = join(dir, `.cascade-cni.${process.pid}.tmp`);
  copyFileSync(ARTIFACTS.cni, tmp);
  chmodSync(tmp, 0o755);
  renameSync(tmp, target);
  return target;
}

if (import.meta.main) {
  const dir = process.argv[2] ?? process.env.CNI_BIN_DIR ?? '/opt/cni/bin';
  try {
    process.stdout.write(`installed ${installCni(dir)}\n`);
  } catch (e) {
    process.stderr.write(`install-cni: cannot install into ${dir}: ${(e as Error).message}\n`);
    process.exit(1);
  }
}
