// The agent DaemonSet's init container: copies the cascade-cni chaining plugin (a static binary) into
// the node's CNI binary directory and, with --chain, chains it into the node's CNI configuration
// (cni-chain.ts). The copy is atomic (a temporary file renamed over the old one), so a runtime calling
// the plugin meanwhile runs either the old or the new one, never half of one.
//   node install-cni.ts [BIN_DIR] [--chain CONF_DIR --pin-dir DIR --record-dir DIR --exempt-namespace NS]
//   (BIN_DIR defaults to $CNI_BIN_DIR or /opt/cni/bin)
import { chmodSync, copyFileSync, mkdirSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ARTIFACTS } from './artifacts.ts';
import { chainCni } from './cni-chain.ts';

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
  let step = 'arguments';
  try {
    const { values, positionals } = parseArgs({
      allowPositionals: true,
      options: {
        chain: { type: 'string' },
        'pin-dir': { type: 'string', default: '/sys/fs/bpf/cascade' },
        'record-dir': { type: 'string', default: '/run/cascade/cni' },
        'exempt-namespace': { type: 'string' },
      },
    });
    const dir = positionals[0] ?? process.env.CNI_BIN_DIR ?? '/opt/cni/bin';
    step = `install into ${dir}`;
    process.stdout.write(`installed ${installCni(dir)}\n`);
    if (values.chain) {
      step = `chain into ${values.chain}`;
      const ns = values['exempt-namespace'];
      const path = chainCni(values.chain, {
        pinDir: values['pin-dir'],
        recordDir: values['record-dir'],
        ...(ns ? { exemptNamespace: ns } : {}),
      });
      process.stdout.write(`chained cascade-cni into ${path}\n`);
    }
  } catch (e) {
    process.stderr.write(`install-cni: cannot ${step}: ${(e as Error).message}\n`);
    process.exit(1);
  }
}
