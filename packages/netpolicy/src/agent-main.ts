// cascade-netpol-agent: the node agent. NODE_NAME (downward API) names the node; the BPF object and
// helper come from the build (ARTIFACTS); maps are pinned under CASCADE_PIN_DIR (default
// /sys/fs/bpf/cascade) so a restarted agent adopts them and reconciles without a window of wrong
// verdicts. Metrics on METRICS_PORT; SIGTERM stops cleanly (programs stay attached, maps pinned).
// CASCADE_NAMESPACE_ENTRY_BUDGET: policy map entries one namespace's NetworkPolicies may use on this
// node (default 100,000). Pod interfaces are found from cascade-cni's records (CASCADE_CNI_RECORD_DIR,
// default /run/cascade/cni) and the kernel (iproute2's ip and bridge).
import { ARTIFACTS, Datapath } from '@cascade/bpf-datapath';
import { jsonLogger, KubeClient } from '@cascade/core';
import { KubeConfig } from '@kubernetes/client-node';
import { NetpolAgent } from './agent.ts';

const node = process.env.NODE_NAME;
if (!node) {
  process.stderr.write('cascade-netpol-agent: NODE_NAME is not set (use the downward API: spec.nodeName)\n');
  process.exit(2);
}
const kc = new KubeConfig();
kc.loadFromDefault();
const datapath = await Datapath.open({
  bpfctl: ARTIFACTS.bpfctl,
  object: ARTIFACTS.object,
  pinDir: process.env.CASCADE_PIN_DIR ?? '/sys/fs/bpf/cascade',
});
if (datapath.replacedMaps.length)
  jsonLogger('cascade-netpol-agent')(
    'warn',
    'pinned maps with an older layout were replaced (content lost)',
    {
      maps: datapath.replacedMaps,
    },
  );
const agent = new NetpolAgent({
  client: new KubeClient(kc),
  node,
  datapath,
  metricsPort: Number(process.env.METRICS_PORT ?? 9090),
  cniRecordDir: process.env.CASCADE_CNI_RECORD_DIR ?? '/run/cascade/cni',
  ...(process.env.CASCADE_NAMESPACE_ENTRY_BUDGET
    ? { namespaceEntryBudget: Number(process.env.CASCADE_NAMESPACE_ENTRY_BUDGET) }
    : {}),
});
await agent.start();
process.on(
  'SIGTERM',
  () =>
    void agent
      .stop()
      .then(() => datapath.close())
      .then(() => process.exit(0)),
);
