// NetpolNodeReports: what one node agent found that a tenant or an admin must hear about (a Service
// its node's budgets leave untranslated, a NetworkPolicy refused for its namespace's policy-map
// budget, a pod whose address a newer pod took), one cluster-scoped object per node, named after it.
// Agents hold no Event grant: RBAC cannot limit a DaemonSet's Events (or reads) to its own node, so
// the agent writes only this object, a ValidatingAdmissionPolicy (agent/rbac.ts) lets it write only
// the one named after the node in its ServiceAccount token, and the netpolicy-controller, which
// reads the whole cluster anyway, turns each finding into a Warning Event on the object concerned.
// `kubectl get netpolnodereports` (nnr) shows every node's findings when no controller runs.
// A report also says the addresses of the node's pod bridges: the source kube-proxy's masquerade gives
// a NodePort flow to a backend on the dialled node, which `cascadectl netpol simulate` judges with.
import { isIP } from 'node:net';
import { crdFor, EFFECTIVE_GROUP } from '@cascade/core';
import { z } from 'zod';
import { zodMessage } from '../engine/model.ts';

export const NODE_REPORT_VERSION = 'v1alpha1';
/** Who found what a report says: the Events relayed for it carry this source component. */
export const AGENT_COMPONENT = 'cascade-netpol-agent';
export const NODE_REPORT_PATH = `/apis/${EFFECTIVE_GROUP}/${NODE_REPORT_VERSION}/netpolnodereports`;
/** Findings one report holds; more are counted in `spec.omitted`. */
export const MAX_FINDINGS = 256;
/** Pod-bridge addresses one report holds at most (a node has one bridge per family, as a rule). */
export const MAX_BRIDGE_ADDRESSES = 16;
/** Tunnel-device addresses one report holds at most (flannel.1, vxlan.calico, tunl0: one or two). */
export const MAX_TUNNEL_ADDRESSES = 16;

/** Staged-flow counts one report holds (by staged object, direction, staged verdict and rule). */
export const MAX_STAGED_COUNTS = 256;
/** The window staged-flow counts cover: the last ten complete minutes. */
export const STAGED_WINDOW_SECONDS = 600;

export const FINDING_REASONS = [
  'ServiceBudgetExceeded',
  'PolicyMapBudgetExceeded',
  'PodAddressConflict',
] as const;
export type FindingReason = (typeof FINDING_REASONS)[number];

/** The kinds a finding can concern, with their apiVersion (what the Event's involvedObject says). */
export const FINDING_KINDS = { Service: 'v1', Pod: 'v1', NetworkPolicy: 'networking.k8s.io/v1' } as const;

const dnsName = z.string().min(1).max(253);
const ipAddress = z
  .string()
  .min(2)
  .max(45)
  .refine((a) => isIP(a) !== 0, 'not an IP address');
export const nodeReportSpecSchema = z.object({
  findings: z
    .array(
      z.object({
        reason: z.enum(FINDING_REASONS),
        kind: z.enum(['Service', 'Pod', 'NetworkPolicy']),
        namespace: z.string().min(1).max(63),
        name: dnsName,
        message: z.string().min(1).max(1024),
      }),
    )
    .max(MAX_FINDINGS),
  /** Findings left out past MAX_FINDINGS (the log and metrics of the agent have them all). */
  omitted: z.number().int().min(0).optional(),
  /**
   * The global addresses of the bridges that carry this node's pods (agent/host-source.ts): what a
   * backend on this node sees as the source of a NodePort flow kube-proxy masqueraded here.
   */
  podBridgeAddresses: z.array(ipAddress).max(MAX_BRIDGE_ADDRESSES).optional(),
  /**
   * The global addresses of this node's tunnel devices (vxlan, geneve, ipip, gre, wireguard:
   * agent/host-source.ts): the source of what the node sends into its CNI's overlay (flannel's
   * flannel.1), so every agent counts them among this node's addresses.
   */
  tunnelAddresses: z.array(ipAddress).max(MAX_TUNNEL_ADDRESSES).optional(),
  /**
   * New flows of this node's pods that the staged set would judge otherwise (its datapath judges them
   * by the staged tables too), in the last STAGED_WINDOW_SECONDS, by the staged object answerable
   * (`StagedNetworkPolicy/shop/x`), direction, staged verdict and the rule that decides it there
   * (none: no rule, the default). The controller sums them into each staged object's status.
   */
  stagedFlows: z
    .array(
      z.object({
        staged: z.string().min(1).max(300),
        direction: z.enum(['ingress', 'egress']),
        verdict: z.enum(['allow', 'deny']),
        rule: z.string().min(1).max(600).optional(),
        flows: z.number().int().min(1),
      }),
    )
    .max(MAX_STAGED_COUNTS)
    .optional(),
  /** The agent that wrote it: its version, its BPF program's digest, cascade-cni in the node's chain. */
  agent: z
    .object({
      version: z.string().min(1).max(64),
      /** The first 12 hex digits of the BPF object's sha256. */
      program: z.string().regex(/^[0-9a-f]{12}$/),
      /** cascade-cni in a .conflist of the node's CNI configuration ("unknown": not mounted). */
      cniChain: z.enum(['chained', 'absent', 'unknown']),
    })
    .optional(),
});
export type NodeReportSpec = z.infer<typeof nodeReportSpecSchema>;
export type Finding = NodeReportSpec['findings'][number];

export const netpolNodeReportCrd = crdFor({
  group: EFFECTIVE_GROUP,
  version: NODE_REPORT_VERSION,
  kind: 'NetpolNodeReport',
  plural: 'netpolnodereports',
  scope: 'Cluster',
  spec: nodeReportSpecSchema,
  status: false,
  categories: ['cascade'],
  shortNames: ['nnr'],
  printerColumns: [
    { name: 'Reasons', type: 'string', jsonPath: '.spec.findings[*].reason' },
    { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
  ],
});

/** A report as read: its spec checked, or why it is ignored. */
export function nodeReportFromObject(o: { spec?: unknown }): NodeReportSpec | { error: string } {
  const r = nodeReportSpecSchema.safeParse(o.spec);
  return r.success ? r.data : { error: zodMessage(r.error, 'spec') };
}

/** One finding's identity (what the controller has posted once). */
export const findingKey = (node: string, f: Finding): string =>
  JSON.stringify([node, f.reason, f.kind, f.namespace, f.name, f.message]);
