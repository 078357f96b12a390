// The Grafana dashboard shipped in the chart (charts/cascade/dashboards/cascade.json): one row per
// component, each panel a PromQL query over a family the binaries export. Generated, so that a test
// can check every family it queries exists in the code. `node packages/distribution/src/dashboard.ts` writes it.
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';

export const DASHBOARD = resolve(import.meta.dirname, '../../../charts/cascade/dashboards/cascade.json');

interface Panel {
  title: string;
  expr: string[];
  unit?: string;
  description: string;
}

const rows: [string, Panel[]][] = [
  [
    'Controllers',
    [
      {
        title: 'Leader',
        expr: ['sum by (job) (cascade_leader)'],
        description: 'Replicas holding the Lease, per controller: 1 in steady state, 0 is an outage.',
      },
      {
        title: 'Reconciles per second by outcome',
        expr: ['sum by (lane, outcome) (rate(cascade_reconciles_total[5m]))'],
        unit: 'ops',
        description:
          'The sync lane (EffectivePolicies, status) and the downstream lane (rendered objects, Affected).',
      },
      {
        title: 'Reconcile latency p99',
        expr: ['histogram_quantile(0.99, sum by (le) (rate(cascade_reconcile_seconds_bucket[5m])))'],
        unit: 's',
        description: 'From a change seen to its objects written.',
      },
      {
        title: 'Queue depth',
        expr: ['max by (job) (cascade_queue_depth)'],
        description: 'Keys waiting for a reconcile.',
      },
      {
        title: 'Writes issued and skipped',
        expr: ['sum(rate(cascade_writes_issued_total[5m]))', 'sum(rate(cascade_writes_skipped_total[5m]))'],
        unit: 'ops',
        description: 'In steady state only skipped grows: an unchanged object is never rewritten.',
      },
      {
        title: 'Objects failing to publish',
        expr: [
          'sum by (job) (cascade_publish_failing_objects)',
          'sum(rate(cascade_publish_failures_total[5m]))',
        ],
        description: 'Alert when above 0: the policies concerned say so in their status.',
      },
      {
        title: 'Policies by condition',
        expr: ['sum by (kind, condition, status, reason) (cascade_policies)'],
        description: 'Accepted/Enforced per kind and reason.',
      },
      {
        title: 'Errors',
        expr: [
          'sum(rate(cascade_reconcile_errors_total[5m]))',
          'sum(rate(cascade_watch_errors_total[5m]))',
          'sum(rate(cascade_lease_errors_total[5m]))',
          'sum(increase(cascade_leader_transitions_total[1h]))',
        ],
        description: 'Reconcile, watch and Lease errors; leader changes in the last hour.',
      },
    ],
  ],
  [
    'Work queues and processes (controller-runtime and prom-client families)',
    [
      {
        title: 'Work queue depth and wait p99',
        expr: [
          'max by (job, name) (workqueue_depth)',
          'histogram_quantile(0.99, sum by (name, le) (rate(workqueue_queue_duration_seconds_bucket[5m])))',
        ],
        description:
          'Keys waiting, and how long a key waits before a worker takes it (controllers and node agents).',
      },
      {
        title: 'Reconciles by result, retries',
        expr: [
          'sum by (controller, result) (rate(controller_runtime_reconcile_total[5m]))',
          'sum by (name) (rate(workqueue_retries_total[5m]))',
        ],
        unit: 'ops',
        description: 'Errors are retried with exponential backoff; a growing error rate is worth an alert.',
      },
      {
        title: 'Stuck workers',
        expr: ['max by (job, name) (workqueue_longest_running_processor_seconds)'],
        unit: 's',
        description: 'How long the longest running reconcile has been running: minutes means stuck.',
      },
      {
        title: 'Memory and CPU',
        expr: [
          'max by (job, instance) (process_resident_memory_bytes)',
          'sum by (job, instance) (rate(process_cpu_seconds_total[5m]))',
        ],
        description: 'Resident memory (bytes) and CPU (cores) per replica and agent.',
      },
      {
        title: 'Event-loop lag p99',
        expr: ['max by (job, instance) (nodejs_eventloop_lag_p99_seconds)'],
        unit: 's',
        description: 'A busy event loop delays watches, probes and the lease renewal.',
      },
      {
        title: 'Lease held',
        expr: ['sum by (name) (leader_election_master_status)'],
        description: "client-go's leader-election gauge: 1 per lease in steady state.",
      },
    ],
  ],
  [
    'Node agents',
    [
      {
        title: 'Packets by verdict',
        expr: [
          'sum(rate(cascade_datapath_packets_allow_total[5m]))',
          'sum(rate(cascade_datapath_packets_deny_total[5m]))',
          'sum(rate(cascade_datapath_packets_ct_hit_total[5m]))',
        ],
        unit: 'pps',
        description: 'Allowed and denied first packets, and packets of established flows (conntrack).',
      },
      {
        title: 'Dropped as hostile or malformed',
        expr: [
          'sum by (instance) (rate(cascade_datapath_packets_spoofed_total[5m]))',
          'sum by (instance) (rate(cascade_datapath_packets_unbound_source_total[5m]))',
          'sum by (instance) (rate(cascade_datapath_packets_not_endpoint_total[5m]))',
          'sum by (instance) (rate(cascade_datapath_packets_malformed_total[5m]))',
          'sum by (instance) (rate(cascade_datapath_packets_bad_l2_total[5m]))',
        ],
        unit: 'pps',
        description:
          "A pod sending with another's address (spoofed), with an address nobody holds yet (a new pod before its agent binds it), traffic of an unbound interface, malformed packets.",
      },
      {
        title: 'Flows by deciding policy and direction',
        expr: [
          'topk(10, sum by (policy, direction, verdict) (rate(cascade_datapath_policy_flows_total[5m])))',
        ],
        unit: 'ops',
        description:
          'The ten policies deciding most reported flows (denied, and allowed ones of audited endpoints), per direction and verdict; 500 policies at most per agent, the rest as "other".',
      },
      {
        title: 'Sync latency and errors',
        expr: [
          'max by (instance) (cascade_datapath_sync_seconds)',
          'sum by (instance) (rate(cascade_datapath_sync_errors_total[5m]))',
        ],
        description: 'How long a sync of the kernel maps takes; errors are retried.',
      },
      {
        title: 'Endpoints, interfaces, conntrack',
        expr: [
          'sum by (instance) (cascade_datapath_endpoints)',
          'sum by (instance) (cascade_datapath_attached_interfaces)',
          'sum by (instance) (cascade_datapath_conntrack_entries)',
        ],
        description: 'Local pods bound, veths carrying the program, live connections.',
      },
      {
        title: 'Fail closed and refused',
        expr: [
          'sum by (instance) (cascade_datapath_fail_closed)',
          'sum by (instance) (cascade_netpol_policies_refused)',
          'sum by (instance) (rate(cascade_datapath_address_conflicts_total[5m]))',
        ],
        description: 'Endpoints held at deny-all, policies refused for size, addresses claimed by two pods.',
      },
      {
        title: 'PodAddressSlices',
        expr: [
          'max(cascade_netpol_pod_address_slices)',
          'sum(rate(cascade_netpol_slice_writes_total[5m]))',
          'sum by (instance) (cascade_agent_slice_pods)',
        ],
        description:
          "Slices the netpolicy-controller publishes, its slice writes, and the other nodes' pods each agent knows from them.",
      },
    ],
  ],
];

/** Every metric family the dashboard queries (without the _bucket suffix of histograms). */
export function dashboardFamilies(): string[] {
  const out = new Set<string>();
  for (const [, panels] of rows)
    for (const p of panels)
      for (const e of p.expr)
        for (const m of e.matchAll(
          /\b((?:cascade|workqueue|controller_runtime|leader_election|process|nodejs)_[a-z0-9_]+)/g,
        ))
          out.add(m[1]!.replace(/_bucket$/, ''));
  return [...out].sort();
}

export function dashboard(): Record<string, unknown> {
  const panels: Record<string, unknown>[] = [];
  let id = 1;
  let y = 0;
  for (const [title, list] of rows) {
    panels.push({ id: id++, type: 'row', title, collapsed: false, gridPos: { h: 1, w: 24, x: 0, y: y++ } });
    list.forEach((p, i) => {
      panels.push({
        id: id++,
        type: 'timeseries',
        title: p.title,
        description: p.description,
        datasource: { type: 'prometheus', uid: '$datasource' },
        fieldConfig: { defaults: { unit: p.unit ?? 'short' }, overrides: [] },
        gridPos: { h: 8, w: 12, x: (i % 2) * 12, y: y + Math.floor(i / 2) * 8 },
        targets: p.expr.map((expr, k) => ({
          refId: String.fromCharCode(65 + k),
          expr,
          datasource: { type: 'prometheus', uid: '$datasource' },
        })),
      });
    });
    y += Math.ceil(list.length / 2) * 8;
  }
  return {
    title: 'Cascade',
    uid: 'cascade-overview',
    description:
      'Cascade controllers and node agents (charts/cascade/dashboards, generated by packages/distribution/src/dashboard.ts)',
    tags: ['cascade'],
    schemaVersion: 39,
    version: 1,
    editable: true,
    time: { from: 'now-1h', to: 'now' },
    templating: {
      list: [{ name: 'datasource', type: 'datasource', query: 'prometheus', label: 'Prometheus' }],
    },
    panels,
  };
}

export const dashboardJson = (): string => `${JSON.stringify(dashboard(), null, 2)}\n`;

if (import.meta.main) writeFileSync(DASHBOARD, dashboardJson());
