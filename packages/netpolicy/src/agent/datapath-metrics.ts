// The agent's families read from the kernel and its flow log: one counter per kernel verdict counter
// (cascade_datapath_packets_<name>_total), the conntrack entries at the last collection, and the
// per-policy flow counts, which name tenants' policies and so go to the tenant registry (served to
// loopback peers only: flows.ts serveTenantMetrics).
import type { COUNTERS } from '@cascade/bpf-datapath';
import type { Metrics } from '@cascade/core/kube';
import { MAX_POLICY_SERIES } from './flows.ts';

/** Each kernel counter the agent exports, with its help text. */
export const KERNEL_COUNTERS: readonly (readonly [keyof typeof COUNTERS, string])[] = [
  ['allow', 'Flows allowed (first packets, and re-judged ones)'],
  ['deny', 'Packets denied'],
  ['ctHit', 'Packets of known flows (answered by conntrack or the flow cache in front of it)'],
  ['ctRejudged', 'Flows judged again after a policy change'],
  ['malformed', 'Frames dropped as too short for their headers'],
  ['notEndpoint', 'Packets of addresses that are not a local endpoint'],
  ['verdictCached', 'First packets answered by the verdict cache'],
  [
    'spoofed',
    "Packets from a pod using another's address (an endpoint elsewhere, a known pod or node) as source or ARP/NDP claim",
  ],
  [
    'unboundSource',
    'Packets from a pod with a source nobody holds yet: a new pod before the agent binds it, or a made-up address',
  ],
  ['badL2', 'VLAN-tagged frames and ethertypes other than IPv4, IPv6, ARP'],
  ['fragUntracked', 'Later fragments whose first fragment was not seen'],
  ['fragBad', 'Tiny first fragments and overlapping fragments'],
  ['extHeaders', 'IPv6 packets with more extension headers than the program walks'],
  ['icmpRelated', 'ICMP errors passed with the allowed flow they report on'],
  ['ndp', 'IPv6 neighbour discovery and MLD packets passed'],
  ['svcNew', 'New flows to a Service frontend sent to a backend'],
  ['svcNat', 'Packets translated to a backend, or back to the frontend'],
  ['ndpRefused', 'Unicast neighbour solicitations and advertisements refused (an address not on the link)'],
  ['eventsSuppressed', "Flow events an endpoint's budget refused (64/s, burst 640 per endpoint)"],
  ['flowBudget', 'New flows dropped: their endpoint was over its budget of new flows'],
  ['ctQuota', 'New flows dropped: their endpoint address held its quota of conntrack entries (32,768)'],
  [
    'ctEvicted',
    'Conntrack entries of live flows overwritten by a new flow: their set of the table (4 flows) was full',
  ],
  ['ctBusy', 'Allowed new flows passed untracked: their conntrack slot was being written by another CPU'],
  [
    'flowCacheFill',
    "Flow cache slots filled by a conntrack hit (churn of the per-CPU cache that answers established flows' packets)",
  ],
  ['icmpTrimmed', 'Related ICMP errors cut to the headers a stack reads'],
  [
    'stagedDiffer',
    'New flows the staged policies would judge otherwise (judged beside the enforced set; never enforced)',
  ],
];

/** Registers the families on the agent's registries; `read` gives their values at each scrape. */
export function datapathMetrics(
  node: Metrics,
  tenant: Metrics,
  read: {
    packets(name: keyof typeof COUNTERS): number;
    policySamples(): [{ policy: string; direction: string; verdict: string }, number][];
    stagedSamples(): [{ policy: string; direction: string; verdict: string }, number][];
    /** Endpoints judged by staged tables too, and those the node's staged budget left out. */
    stagedEndpoints(): { judged: number; leftOut: number };
    conntrackEntries(): number;
    /** The flow cache as loaded: slots per CPU and bytes on this node. */
    flowCache(): { slots: number; bytes: number };
  },
): void {
  for (const [name, help] of KERNEL_COUNTERS)
    node.counterFrom(
      `cascade_datapath_packets_${name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}_total`,
      help,
      () => read.packets(name),
    );
  tenant.counterFamily(
    'cascade_datapath_policy_flows_total',
    `Flows the kernel reported with their deciding policy (denied flows, and allowed ones of audited endpoints), by direction and verdict; flows over an endpoint's event budget are not seen (events_suppressed counts them); ${MAX_POLICY_SERIES} policies at most, the rest as policy="other"`,
    ['policy', 'direction', 'verdict'],
    () => read.policySamples(),
  );
  tenant.counterFamily(
    'cascade_datapath_staged_flows_total',
    `New flows the staged policies would decide otherwise (judged by the datapath beside the enforced set, never enforced), by the policy of the staged verdict's rule, direction and staged verdict; within each endpoint's event budget; ${MAX_POLICY_SERIES} policies at most, the rest as policy="other"`,
    ['policy', 'direction', 'verdict'],
    () => read.stagedSamples(),
  );
  node.gauge(
    'cascade_datapath_staged_endpoints',
    'Endpoint addresses of this node whose new flows its staged tables judge too',
    () => read.stagedEndpoints().judged,
  );
  node.gauge(
    'cascade_datapath_staged_left_out',
    "Pods of this node not judged by the staged set: its staged tables' entries were over the node's staged budget",
    () => read.stagedEndpoints().leftOut,
  );
  node.gauge('cascade_datapath_conntrack_entries', 'Conntrack entries at the last collection', () =>
    read.conntrackEntries(),
  );
  node.gauge(
    'cascade_datapath_flow_cache_slots',
    'Flow cache slots per CPU, as loaded (--flow-cache-memory and the possible CPUs)',
    () => read.flowCache().slots,
  );
  node.gauge(
    'cascade_datapath_flow_cache_bytes',
    'Flow cache memory on this node: slots x 56 bytes x possible CPUs',
    () => read.flowCache().bytes,
  );
}
