// Leaving a node when Cascade is uninstalled, and only then. A restart, an upgrade or a node shutdown
// keeps the programs attached and the maps pinned (a pod must never run unenforced while an agent
// comes back); an uninstall must leave plain networking, or cascade-cni, still in the node's CNI
// chain, fails every new pod closed and old pods keep the last rules forever (issue 41 item 2).
//
// The agent tells them apart by its DaemonSet: `helm uninstall` (or `kubectl delete ds`) deletes it
// before the garbage collector deletes the pods, so the agent, which watches its own DaemonSet, sees
// it DELETED (or marked for deletion) before its SIGTERM; a GET at SIGTERM that answers 404 says the
// same. Anything else (the DaemonSet there, the API server unreachable, the agent's grant already
// gone) is not an uninstall: the node keeps failing closed, and `cascadectl doctor` names the node.
//
// Leaving, in this order: cascade-cni out of every conflist (no new pod gets the program), the
// programs detached from every interface that carries them, then the pins removed.
import { rmSync } from 'node:fs';
import { type Datapath, unchainCni } from '@cascade/bpf-datapath';
import { ApiError, Informer, type KubeClient, type KubeObject, type Logger } from '@cascade/core/kube';

/** Watches the agent's own DaemonSet: whether it has been deleted (an uninstall). */
export class UninstallSignal {
  private readonly client: KubeClient;
  private readonly path: string;
  private readonly informer: Informer;
  /** The watch saw the DaemonSet deleted, or marked for deletion. */
  private deleted = false;

  constructor(client: KubeClient, namespace: string, daemonSet: string) {
    this.client = client;
    this.path = `/apis/apps/v1/namespaces/${namespace}/daemonsets/${daemonSet}`;
    const selector = encodeURIComponent(`metadata.name=${daemonSet}`);
    this.informer = new Informer(
      client,
      `/apis/apps/v1/namespaces/${namespace}/daemonsets?fieldSelector=${selector}`,
      (type, obj) => {
        this.deleted = type === 'DELETED' || Boolean(obj.metadata.deletionTimestamp);
      },
    );
  }

  start(): void {
    this.informer.start();
  }

  /** Whether this is an uninstall: the DaemonSet seen deleted, or gone now (404). */
  async uninstalling(): Promise<boolean> {
    this.informer.stop();
    if (this.deleted) return true;
    try {
      const ds = await this.client.request<KubeObject>('GET', this.path);
      return Boolean(ds.metadata.deletionTimestamp);
    } catch (e) {
      return e instanceof ApiError && e.status === 404;
    }
  }
}

/** What leaving the node did. */
export interface LeaveReport {
  unchained: string[];
  detached: number;
  pinsRemoved: boolean;
  failed: string[];
}

/** Takes Cascade off this node: the CNI chain, the programs, the pins. Never throws; reports failures. */
export async function leaveNode(
  datapath: Datapath,
  opts: { pinDir: string; cniConfDir?: string; log: Logger },
): Promise<LeaveReport> {
  const report: LeaveReport = { unchained: [], detached: 0, pinsRemoved: false, failed: [] };
  if (opts.cniConfDir) {
    const r = unchainCni(opts.cniConfDir);
    report.unchained = r.changed;
    report.failed.push(...r.failed);
  }
  try {
    for (const ifindex of (await datapath.attachments()).keys())
      try {
        await datapath.detach(ifindex);
        report.detached++;
      } catch (e) {
        report.failed.push(`detach ifindex ${ifindex}: ${(e as Error).message}`);
      }
  } catch (e) {
    report.failed.push(`reading attachments: ${(e as Error).message}`);
  }
  await datapath.close().catch(() => {});
  try {
    rmSync(opts.pinDir, { recursive: true, force: true });
    report.pinsRemoved = true;
  } catch (e) {
    report.failed.push(`removing ${opts.pinDir}: ${(e as Error).message}`);
  }
  opts.log(report.failed.length ? 'warn' : 'info', 'Cascade uninstalled: left the node', { ...report });
  return report;
}
