// A datapath of its own: the real program loaded with maps pinned in a fresh directory under
// /sys/fs/bpf, removed on cleanup. For the kernel tests and `npm run demo`'s kernel part, which run
// the program beside a node's without touching its pins.
import { mkdtempSync, rmSync } from 'node:fs';
import { ARTIFACTS } from './artifacts.ts';
import { Datapath } from './loader.ts';

/** A datapath in a fresh pin directory; `cleanup` closes it and removes the directory. */
export async function freshDatapath(
  policyMaxEntries?: number,
  object = ARTIFACTS.object,
  adminReserve?: number,
): Promise<{ dp: Datapath; pinDir: string; cleanup: () => Promise<void> }> {
  const pinDir = mkdtempSync('/sys/fs/bpf/cascade-test-');
  const dp = await Datapath.open({
    bpfctl: ARTIFACTS.bpfctl,
    object,
    pinDir,
    ...(policyMaxEntries ? { policyMaxEntries } : {}),
    ...(adminReserve !== undefined ? { adminReserve } : {}),
  });
  return {
    dp,
    pinDir,
    cleanup: async () => {
      await dp.close();
      rmSync(pinDir, { recursive: true, force: true });
    },
  };
}
