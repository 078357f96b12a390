// cascade-netpol-agent: the node agent. The node comes from --node-name (the chart passes NODE_NAME
// from the downward API); the BPF object and helper come from the build (ARTIFACTS); maps are pinned
// under --pin-dir so a restarted agent adopts them and reconciles without a window of wrong verdicts.
// SIGTERM stops cleanly (programs stay attached, maps pinned), except when Cascade is being
// uninstalled (its DaemonSet deleted: uninstall.ts): then it takes cascade-cni out of the node's CNI
// configuration, detaches the programs and removes the pins. Every flag's default can also come from
// the environment variable it names, which is how the chart configures it.
import { readFileSync } from 'node:fs';
import {
  ARTIFACTS,
  Datapath,
  flowCacheSlots,
  MAX_BACKEND_SLOTS,
  MAX_FRONTENDS,
  possibleCpus,
  quantityBytes,
} from '@cascade/bpf-datapath';
import { hashOf, watchNamespaces } from '@cascade/core';
import { binary, jsonLogger, KubeClient } from '@cascade/core/kube';
import { DEFAULT_SERVICE_BUDGET } from '../engine/service-budget.ts';
import { DEFAULT_TENANT_LABEL, validTenantLabel } from '../engine/tenants.ts';
import { NetpolAgent } from './agent.ts';
import { agentMetricsBindAddress } from './flows-read.ts';
import { leaveNode, UninstallSignal } from './uninstall.ts';

const NAME = 'cascade-netpol-agent';
const env = process.env;
const USAGE = `Usage: ${NAME} [flags]

Flags (defaults from the environment variable named, then the value shown):
  --node-name NAME                  this node; its local pods are enforced ($NODE_NAME; required)
  --pin-dir DIR                     bpffs directory of the pinned maps ($CASCADE_PIN_DIR, /sys/fs/bpf/cascade)
  --metrics-bind-address ADDR       /metrics, /healthz, /readyz, /flows ($CASCADE_METRICS_BIND_ADDRESS,
                                    else $METRICS_PORT as 127.0.0.1:PORT, else "127.0.0.1:9090"; "0" disables;
                                    /flows names pods and answers loopback peers only, whatever the address)
  --cni-record-dir DIR              cascade-cni's interface records ($CASCADE_CNI_RECORD_DIR, /run/cascade/cni)
  --cni-conf-dir DIR                the node's CNI configuration, cascade-cni taken out of it on uninstall
                                    ($CASCADE_CNI_CONF_DIR; "": left alone)
  --daemonset NAME                  the agent's DaemonSet in $POD_NAMESPACE: deleted, it means an uninstall
                                    and SIGTERM leaves the node ($CASCADE_DAEMONSET; "": never leaves)
  --tenant-label KEY                the namespace label naming a namespace's tenant: namespaces that share
                                    its value share the budgets and the identity cap below; one without it
                                    is a tenant of its own ($CASCADE_TENANT_LABEL, cascade.dev/tenant; "":
                                    every namespace its own; the controller's must match)
  --namespace-entry-budget N        policy map entries one tenant's NetworkPolicies may use on this
                                    node for peers it controls ($CASCADE_NAMESPACE_ENTRY_BUDGET, 100000)
  --staged-entry-budget N           policy map entries the staged policies' own rule sets may add on
                                    this node; pods past it are not judged by the staged set (a metric
                                    and a log line say so) ($CASCADE_STAGED_ENTRY_BUDGET, 100000)
  --foreign-identity-cap N          label sets per tenant that other namespaces' NetworkPolicies
                                    select one by one; newer ones are left out of those peers
                                    ($CASCADE_FOREIGN_IDENTITY_CAP, 512; the controller's must match)
  --service-namespace-frontends N   Service frontends one tenant may take in this node's maps
                                    ($CASCADE_SERVICE_NAMESPACE_FRONTENDS, 2048; the oldest Services first)
  --service-namespace-backends N    backend slots one tenant may take ($CASCADE_SERVICE_NAMESPACE_BACKENDS,
                                    16384); a Service over its tenant's budget is refused alone
                                    (untranslated; new flows to its ClusterIPs dropped)
  --service-reserved-namespaces NS  namespaces served first, without a budget ($CASCADE_SERVICE_RESERVED_NAMESPACES,
                                    "kube-system"; comma-separated)
  --audit-namespaces NS              namespaces whose allowed flows are reported too, beside denied ones
                                    ($CASCADE_AUDIT_NAMESPACES, none; comma-separated; within each pod's
                                    event budget)
  --prefer-node-source true|false   give the kernel routes to this node's pod bridges the node's
                                    InternalIP as preferred source, so kubelet probes are judged as the
                                    node, which NetworkPolicy never blocks ($CASCADE_PREFER_NODE_SOURCE, true)
  --pod-source pods|slices          where other nodes' pods are learnt: every Pod of the cluster, or this
                                    node's Pods and the netpolicy-controller's PodAddressSlices
                                    ($CASCADE_POD_SOURCE, pods)
  --flow-cache-memory BYTES         the flow cache's memory on this node, e.g. 16Mi: slots per CPU are the
                                    largest power of two (256 to 16,384) that fits over the possible CPUs
                                    ($CASCADE_FLOW_CACHE_MEMORY, 16Mi)
  --zap-log-level LEVEL             debug|info|warn|error ($CASCADE_LOG_LEVEL, info)
  --kubeconfig PATH                 kubeconfig (default: in-cluster, then $KUBECONFIG, ~/.kube/config)
  --version                         the version
  -h, --help                        this text
`;

const b = binary(
  NAME,
  USAGE,
  {
    'node-name': { type: 'string', default: env.NODE_NAME ?? '' },
    'pin-dir': { type: 'string', default: env.CASCADE_PIN_DIR ?? '/sys/fs/bpf/cascade' },
    'metrics-bind-address': {
      type: 'string',
      default: agentMetricsBindAddress(env),
    },
    'cni-record-dir': { type: 'string', default: env.CASCADE_CNI_RECORD_DIR ?? '/run/cascade/cni' },
    'cni-conf-dir': { type: 'string', default: env.CASCADE_CNI_CONF_DIR ?? '' },
    daemonset: { type: 'string', default: env.CASCADE_DAEMONSET ?? '' },
    'namespace-entry-budget': { type: 'string', default: env.CASCADE_NAMESPACE_ENTRY_BUDGET ?? '100000' },
    'foreign-identity-cap': { type: 'string', default: env.CASCADE_FOREIGN_IDENTITY_CAP ?? '512' },
    'staged-entry-budget': { type: 'string', default: env.CASCADE_STAGED_ENTRY_BUDGET ?? '100000' },
    'tenant-label': { type: 'string', default: env.CASCADE_TENANT_LABEL ?? DEFAULT_TENANT_LABEL },
    'pod-source': { type: 'string', default: env.CASCADE_POD_SOURCE ?? 'pods' },
    'service-namespace-frontends': {
      type: 'string',
      default: env.CASCADE_SERVICE_NAMESPACE_FRONTENDS ?? String(DEFAULT_SERVICE_BUDGET.frontends),
    },
    'service-namespace-backends': {
      type: 'string',
      default: env.CASCADE_SERVICE_NAMESPACE_BACKENDS ?? String(DEFAULT_SERVICE_BUDGET.backends),
    },
    'service-reserved-namespaces': {
      type: 'string',
      default: env.CASCADE_SERVICE_RESERVED_NAMESPACES ?? DEFAULT_SERVICE_BUDGET.reserved.join(','),
    },
    'audit-namespaces': { type: 'string', default: env.CASCADE_AUDIT_NAMESPACES ?? '' },
    'prefer-node-source': { type: 'string', default: env.CASCADE_PREFER_NODE_SOURCE ?? 'true' },
    'flow-cache-memory': { type: 'string', default: env.CASCADE_FLOW_CACHE_MEMORY ?? '16Mi' },
    'zap-log-level': { type: 'string', default: env.CASCADE_LOG_LEVEL ?? 'info' },
    kubeconfig: { type: 'string' },
  },
  new URL('../../package.json', import.meta.url),
);
const { values, fail } = b;
const node = String(values['node-name']);
if (!node) fail('--node-name (or NODE_NAME from the downward API: spec.nodeName) is required');
const podSourceText = String(values['pod-source']);
if (podSourceText !== 'pods' && podSourceText !== 'slices')
  fail(`--pod-source: "${podSourceText.slice(0, 40)}" is not one of pods, slices`);
const podSource = podSourceText as 'pods' | 'slices';
const budget = b.whole('namespace-entry-budget', 'entries', 1_048_576);
const tenantLabel = String(values['tenant-label']);
if (!validTenantLabel(tenantLabel)) fail(`--tenant-label: "${tenantLabel.slice(0, 80)}" is not a label key`);
const reserved = watchNamespaces(String(values['service-reserved-namespaces']));
if (typeof reserved === 'string') fail(`--service-reserved-namespaces: ${reserved}`);
const serviceBudget = {
  frontends: b.whole('service-namespace-frontends', 'frontends', MAX_FRONTENDS),
  backends: b.whole('service-namespace-backends', 'backend slots', MAX_BACKEND_SLOTS),
  reserved: typeof reserved === 'string' ? [] : (reserved ?? []),
};
const preferSource = String(values['prefer-node-source']);
if (preferSource !== 'true' && preferSource !== 'false') fail('--prefer-node-source: true or false');
const audited = watchNamespaces(String(values['audit-namespaces']));
if (typeof audited === 'string') fail(`--audit-namespaces: ${audited}`);
const metricsBindAddress = b.bindAddress('metrics-bind-address');
const log = jsonLogger(NAME, undefined, b.logLevel());
const kc = b.kubeConfig();
const daemonSet = String(values.daemonset);
if (daemonSet && !/^[a-z0-9]([-a-z0-9]{0,251}[a-z0-9])?$/.test(daemonSet))
  fail(`--daemonset: "${daemonSet.slice(0, 60)}" is not an object name`);
if (daemonSet && !env.POD_NAMESPACE) fail('--daemonset needs POD_NAMESPACE (the downward API)');
const pinDir = String(values['pin-dir']);
const cniConfDir = String(values['cni-conf-dir']);
const flowCacheMemory = quantityBytes(String(values['flow-cache-memory']));
if (flowCacheMemory === undefined || flowCacheMemory < 1 << 20 || flowCacheMemory > 16 * 2 ** 30)
  fail(
    `--flow-cache-memory: "${String(values['flow-cache-memory']).slice(0, 40)}" is not a size from 1Mi to 16Gi (bytes, or Ki, Mi, Gi)`,
  );
const cpus = possibleCpus();
const datapath = await Datapath.open({
  bpfctl: ARTIFACTS.bpfctl,
  object: ARTIFACTS.object,
  pinDir,
  flowSlots: flowCacheSlots(flowCacheMemory!, cpus),
});
log('info', 'flow cache sized', {
  slotsPerCpu: datapath.flowSlots,
  cpus,
  bytes: datapath.flowCacheBytes,
});
if (datapath.replacedMaps.length)
  log('warn', 'pinned maps with an older layout were replaced (content lost)', {
    maps: datapath.replacedMaps,
  });
const client = new KubeClient(kc);
const uninstall = daemonSet ? new UninstallSignal(client, env.POD_NAMESPACE!, daemonSet) : undefined;
const agent = new NetpolAgent({
  client,
  node,
  datapath,
  log,
  ...(metricsBindAddress ? { metricsBindAddress } : {}),
  cniRecordDir: String(values['cni-record-dir']),
  ...(cniConfDir ? { cniConfDir } : {}),
  identity: { version: b.version(), program: hashOf(readFileSync(ARTIFACTS.object), 12) },
  namespaceEntryBudget: budget,
  stagedEntryBudget: b.whole('staged-entry-budget', 'entries', 1_048_576),
  foreignIdentityCap: b.whole('foreign-identity-cap', 'label sets', 1_000_000),
  tenantLabel,
  serviceBudget,
  podSource,
  ...(Array.isArray(audited) ? { auditNamespaces: audited } : {}),
  preferNodeSource: preferSource === 'true',
  // the downward API's metadata.namespace (the chart sets it): Cascade's own pods are read directly
  ...(env.POD_NAMESPACE ? { ownNamespace: env.POD_NAMESPACE } : {}),
});
await agent.start();
uninstall?.start();
process.on('SIGTERM', () => {
  void (async () => {
    const leaving = (await uninstall?.uninstalling()) ?? false;
    await agent.stop();
    if (leaving) await leaveNode(datapath, { pinDir, ...(cniConfDir ? { cniConfDir } : {}), log });
    else await datapath.close();
    process.exit(0);
  })();
});
