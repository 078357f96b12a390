// The agent's side of NetpolNodeReports (cluster/node-report.ts): what this node found that a tenant
// or an admin must hear about, written to the one object named after the node, only when it changed
// (zero writes in steady state; a restart compares with the live object first). A write that fails
// is logged and tried again at a sync 30 s later. The object is owned by the Node, so it goes with it.

import type { KubeClient, Logger, Metrics } from '@cascade/core/kube';
import {
  AGENT_COMPONENT,
  type FINDING_KINDS,
  type Finding,
  findingKey,
  MAX_BRIDGE_ADDRESSES,
  MAX_FINDINGS,
  MAX_TUNNEL_ADDRESSES,
  NODE_REPORT_PATH,
  NODE_REPORT_VERSION,
  type NodeReportSpec,
} from '../cluster/node-report.ts';

const RETRY_MS = 30_000;

/** What the agent read of its node's own interfaces (host-source.ts) for its report. */
export interface NodeAddressesFound {
  /** the global addresses of the bridges that carry its pods */
  bridges?: readonly string[];
  /** the global addresses of its tunnel devices */
  tunnels?: readonly string[];
}

export class NodeReporter {
  private readonly client: KubeClient;
  private readonly node: string;
  private readonly log: Logger;
  private readonly writes: { inc(): void };
  /** The spec last written or found live (JSON); undefined until the live object was read. */
  private written?: string;
  private owner?: { uid: string } | null;
  /** After a failed write (the CRD not served, the API server away): not before this time. */
  private retryAt = 0;

  constructor(opts: { client: KubeClient; node: string; log: Logger; metrics: Metrics }) {
    this.client = opts.client;
    this.node = opts.node;
    this.log = opts.log;
    this.writes = opts.metrics.counter(
      'cascade_agent_report_writes_total',
      "Writes of this node's NetpolNodeReport (only when its findings changed)",
    );
  }

  /**
   * The report `findings` make: sorted, cut to MAX_FINDINGS, messages cut to 1024 characters; with the
   * node's pod-bridge and tunnel addresses (each sorted, at most 16), when it has any.
   */
  static spec(
    findings: Finding[],
    found: NodeAddressesFound = {},
    agent?: NodeReportSpec['agent'],
    stagedFlows: NodeReportSpec['stagedFlows'] = [],
  ): NodeReportSpec {
    const sorted = findings
      .map((f) => ({ ...f, message: f.message.slice(0, 1024) }))
      .sort((a, b) => (findingKey('', a) < findingKey('', b) ? -1 : 1));
    const kept = sorted.slice(0, MAX_FINDINGS);
    const bridges = [...new Set(found.bridges ?? [])].sort().slice(0, MAX_BRIDGE_ADDRESSES);
    const tunnels = [...new Set(found.tunnels ?? [])].sort().slice(0, MAX_TUNNEL_ADDRESSES);
    return {
      findings: kept,
      ...(sorted.length > kept.length ? { omitted: sorted.length - kept.length } : {}),
      ...(bridges.length ? { podBridgeAddresses: bridges } : {}),
      ...(tunnels.length ? { tunnelAddresses: tunnels } : {}),
      ...(agent ? { agent } : {}),
      ...(stagedFlows.length ? { stagedFlows } : {}),
    };
  }

  async publish(
    findings: Finding[],
    found: NodeAddressesFound = {},
    agent?: NodeReportSpec['agent'],
    stagedFlows: NodeReportSpec['stagedFlows'] = [],
  ): Promise<void> {
    const spec = NodeReporter.spec(findings, found, agent, stagedFlows);
    const text = JSON.stringify(spec);
    if (text === this.written || Date.now() < this.retryAt) return;
    const path = `${NODE_REPORT_PATH}/${encodeURIComponent(this.node)}`;
    try {
      if (this.written === undefined) {
        const live = await this.client.request('GET', path).catch(() => undefined);
        const liveSpec = (live as { spec?: NodeReportSpec } | undefined)?.spec;
        if (
          liveSpec &&
          JSON.stringify(
            NodeReporter.spec(
              liveSpec.findings ?? [],
              { bridges: liveSpec.podBridgeAddresses, tunnels: liveSpec.tunnelAddresses },
              liveSpec.agent,
              liveSpec.stagedFlows,
            ),
          ) === text
        ) {
          this.written = text;
          return;
        }
      }
      if (this.owner === undefined) {
        const n = (await this.client
          .request('GET', `/api/v1/nodes/${encodeURIComponent(this.node)}`)
          .catch(() => undefined)) as { metadata?: { uid?: string } } | undefined;
        this.owner = n?.metadata?.uid ? { uid: n.metadata.uid } : null;
      }
      await this.client.apply(
        path,
        {
          apiVersion: `cascade.dev/${NODE_REPORT_VERSION}`,
          kind: 'NetpolNodeReport',
          metadata: {
            name: this.node,
            labels: { 'app.kubernetes.io/part-of': 'cascade' },
            ...(this.owner
              ? {
                  ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: this.node, uid: this.owner.uid }],
                }
              : {}),
          },
          spec,
        },
        AGENT_COMPONENT,
      );
      this.written = text;
      this.writes.inc();
    } catch (e) {
      this.retryAt = Date.now() + RETRY_MS;
      this.log('warn', 'NetpolNodeReport not written (tried again at a sync after 30 s)', {
        error: String(e),
      });
    }
  }
}

/** A finding about `kind` namespace/name (the apiVersion is the kind's). */
export const finding = (
  reason: Finding['reason'],
  kind: keyof typeof FINDING_KINDS,
  namespace: string,
  name: string,
  message: string,
): Finding => ({ reason, kind, namespace, name, message });
