// Leader election on a coordination.k8s.io Lease: only the holder writes. A replica takes over when
// the holder has not renewed within the lease duration; release() gives the lease up on shutdown.
import { ApiError, errorText, type KubeClient } from './client.ts';

interface Lease {
  metadata: { name: string; namespace: string; resourceVersion?: string };
  spec: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    renewTime?: string;
    acquireTime?: string;
    leaseTransitions?: number;
  };
}

const microTime = (d: Date) => d.toISOString().replace('Z', '000Z');

export class LeaderElector {
  leader = false;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private readonly path: string;
  private readonly client: KubeClient;
  private readonly identity: string;
  private readonly durationS: number;
  private readonly onChange: (leader: boolean) => void;
  /** The last lease error while it lasts; onError is called when failing starts and when it clears. */
  failing?: string;
  onError: (error: string | undefined) => void = () => {};

  constructor(
    client: KubeClient,
    namespace: string,
    name: string,
    identity: string,
    durationS: number,
    onChange: (leader: boolean) => void,
  ) {
    this.client = client;
    this.identity = identity;
    this.durationS = durationS;
    this.onChange = onChange;
    this.path = `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${name}`;
  }

  start(): void {
    const tick = async () => {
      const was = this.leader;
      try {
        this.leader = await this.tryAcquireOrRenew();
        if (this.failing !== undefined) {
          this.failing = undefined;
          this.onError(undefined);
        }
      } catch (e) {
        this.leader = false;
        const msg = errorText(e);
        const was = this.failing;
        this.failing = msg;
        if (was === undefined) this.onError(msg); // once per state change
      }
      if (this.stopped) {
        this.leader = false;
        return;
      }
      if (was !== this.leader) this.onChange(this.leader);
      this.timer = setTimeout(tick, (this.durationS * 1000) / 3);
    };
    void tick();
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const now = new Date();
    let lease: Lease | undefined;
    try {
      lease = await this.client.request<Lease>('GET', this.path);
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) throw e;
    }
    const [ns, name] = this.path.split('/namespaces/')[1]!.split('/leases/') as [string, string];
    if (!lease) {
      await this.client.request('POST', this.path.slice(0, this.path.lastIndexOf('/')), {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name, namespace: ns },
        spec: {
          holderIdentity: this.identity,
          leaseDurationSeconds: this.durationS,
          acquireTime: microTime(now),
          renewTime: microTime(now),
          leaseTransitions: 0,
        },
      });
      return true;
    }
    const s = lease.spec;
    const expired =
      !s.holderIdentity ||
      !s.renewTime ||
      Date.parse(s.renewTime) + (s.leaseDurationSeconds ?? this.durationS) * 1000 < now.getTime();
    if (s.holderIdentity !== this.identity && !expired) return false;
    const spec = {
      ...s,
      holderIdentity: this.identity,
      leaseDurationSeconds: this.durationS,
      renewTime: microTime(now),
    };
    if (s.holderIdentity !== this.identity) {
      spec.acquireTime = microTime(now);
      spec.leaseTransitions = (s.leaseTransitions ?? 0) + 1;
    }
    try {
      await this.client.request('PUT', this.path, {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: lease.metadata,
        spec,
      });
      return true;
    } catch (e) {
      if (e instanceof ApiError && e.status === 409) return false; // someone else renewed first
      throw e;
    }
  }

  /** Stops renewing without giving the lease up (what a crash looks like to the other replicas). */
  abandon(): void {
    clearTimeout(this.timer);
    this.stopped = true;
    this.leader = false;
  }

  async release(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    if (!this.leader) return;
    this.leader = false;
    try {
      const lease = await this.client.request<Lease>('GET', this.path);
      if (lease.spec.holderIdentity === this.identity) {
        await this.client.request('PUT', this.path, {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: lease.metadata,
          spec: { ...lease.spec, holderIdentity: '', renewTime: microTime(new Date(0)) },
        });
      }
    } catch {}
  }
}
