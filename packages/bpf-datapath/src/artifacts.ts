// Where the set-up step (scripts/setup.d/10-bpf.sh) puts the compiled BPF object and the libbpf helper.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

export const ARTIFACTS = {
  object: join(root, 'build', 'cascade.bpf.o'),
  /** The program's source (npm run bench compiles stage-removed builds of it). */
  source: join(root, 'bpf', 'cascade.bpf.c'),
  bpfctl: join(root, 'build', 'cascade-bpfctl'),
  /** The CNI chaining plugin: attaches the pinned programs to a new pod's veth at ADD. */
  cni: join(root, 'build', 'cascade-cni'),
  /** Bench-only builds of the same program: every repeat is a flow's first packet; and, in addition,
   * the verdict cache never answers (every verdict walks the rule sets). */
  benchNewFlows: join(root, 'build', 'cascade-bench-new-flows.bpf.o'),
  benchCold: join(root, 'build', 'cascade-bench-cold.bpf.o'),
};

/** Why the kernel datapath cannot be used here, or undefined when it can. */
export function kernelUnavailable(): string | undefined {
  if (!existsSync(ARTIFACTS.object) || !existsSync(ARTIFACTS.bpfctl) || !existsSync(ARTIFACTS.cni))
    return `BPF artifacts missing (${ARTIFACTS.object}); run scripts/setup.sh`;
  if (process.getuid?.() !== 0) return 'not root: BPF programs cannot be loaded';
  if (!existsSync('/sys/fs/bpf')) return '/sys/fs/bpf missing';
  return undefined;
}
