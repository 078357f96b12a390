// A peer instead of Cascade (`up --netpol kube-network-policies`): SIG Network's kube-network-policies
// (NetworkPolicy, AdminNetworkPolicy and BaselineAdminNetworkPolicy on nftables + nfqueue), its
// binary built from its Go module, its image built here, and its own manifest (install-anp.yaml: the
// DaemonSet, ServiceAccount and RBAC) applied with only the image changed, so the suites and the
// benchmark meet it as its users run it. Nothing of Cascade runs then (no chart, no agent).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fail } from './proc.ts';
import { buildDir } from './state.ts';

export type Netpol = 'cascade' | 'kube-network-policies';
export const NETPOLS: readonly Netpol[] = ['cascade', 'kube-network-policies'];
/** distribution's peerRecipe names it so */
export const PEER_IMAGE = 'cascade.local/kube-network-policies:peer';

/** kube-network-policies' manifest with the image built here (never pulled: there is no registry). */
export function peerManifest(upstream: string): string {
  const image = /^(\s*)image: registry\.k8s\.io\/networking\/kube-network-policies:\S+$/m;
  const m = image.exec(upstream);
  if (!m) fail('kube-network-policies: its install-anp.yaml names no image of its own to replace');
  return upstream.replace(image, `${m![1]}image: ${PEER_IMAGE}\n${m![1]}imagePullPolicy: Never`);
}

/** Its binary and manifest, built once (tools/cluster/build/kube-network-policies.sh): their directory. */
export const peerBins = (): string => buildDir('tools/cluster/build/kube-network-policies.sh');

/** Applies its manifest; waits for its DaemonSet (the caller reports why it is not ready). */
export function peerUp(
  bin: string,
  kubectl: (...args: string[]) => string,
  input: (yaml: string) => void,
): void {
  input(peerManifest(readFileSync(join(bin, 'install-anp.yaml'), 'utf8')));
  kubectl('-n', 'kube-system', 'rollout', 'status', 'daemonset/kube-network-policies', '--timeout=180s');
}
