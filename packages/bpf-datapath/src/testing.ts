// Helpers for kernel tests: a datapath in a fresh pin directory, and the CI rule that a missing
// kernel is a failure (not a skip) when CI=true.
import { kernelUnavailable } from './artifacts.ts';
import type { Datapath } from './loader.ts';
import { buildPacket, type PacketSpec } from './packet.ts';
import { ReferenceDatapath } from './reference.ts';
import { freshDatapath } from './scratch.ts';

export { freshDatapath };

import type { TableEntry } from './state.ts';

/** true: run the kernel tests; false: skip them (only allowed outside CI). Throws in CI without a kernel. */
export function kernelTestsEnabled(): boolean {
  const reason = kernelUnavailable();
  if (!reason) return true;
  if (process.env.CI === 'true') throw new Error(`kernel tests required in CI: ${reason}`);
  return false;
}

/** The reference datapath over what the kernel maps hold now. */
export async function referenceOf(dp: Datapath): Promise<ReferenceDatapath> {
  const dump = async (m: string) =>
    (await dp.ctl.send(`dump ${m}`, [], 'count'))
      .slice(1)
      .map((l) => l.split(' ').map((h) => Buffer.from(h, 'hex')) as [Buffer, Buffer]);
  return new ReferenceDatapath({
    ipcache: await dump('cascade_ipcache'),
    hosts: await dump('cascade_hosts'),
    endpoints: await dump('cascade_endpoints'),
    policy: await dump('cascade_policy'),
    services: await dump('cascade_services'),
    backends: await dump('cascade_backends'),
    staged: await dump('cascade_staged'),
    hostIdentity: await dp.hostIdentity(),
  });
}

/** One rule-set entry, positionally (hand-written tables in kernel tests). */
export const entry = (
  identity: number,
  proto: number,
  port: number,
  plen: number,
  precedence: number,
  verdict: TableEntry['verdict'],
  rule = 1,
): TableEntry => ({ identity, proto, port, plen, precedence, verdict, rule });

/** The table keys of an endpoint whose four rule sets are named after direction and layer. */
export const TABLES_OF = {
  ingress: { admin: 'in-admin', lower: 'in-lower' },
  egress: { admin: 'out-admin', lower: 'out-lower' },
};

export const TC_ACT_OK = 0;
export const TC_ACT_SHOT = 2;

/** Kernel verdict for one packet in one direction of the endpoint that owns src (egress) or dst (ingress). */
export async function kernelVerdict(
  dp: Datapath,
  direction: 'ingress' | 'egress',
  p: PacketSpec,
): Promise<'allow' | 'deny'> {
  const r = await dp.run(direction === 'egress' ? 'from_endpoint' : 'to_endpoint', buildPacket(p));
  return r.retval === TC_ACT_SHOT ? 'deny' : 'allow';
}
