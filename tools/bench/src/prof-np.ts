import { NetpolEngine } from '@cascade/netpolicy';
import { generateNetpolCluster } from './netpol-cluster.ts';

const cluster = generateNetpolCluster({
  namespaces: 500,
  pods: 10_000,
  labelSets: 2000,
  anps: 100,
  rulesPerAnp: 20,
  networkPolicies: 3000,
  ipBlockPolicies: 500,
});
const e = NetpolEngine.fromCluster(cluster);
const pods = [...e.pods.values()];
const t = performance.now();
for (let i = 0; i < 40; i++) {
  const p = pods[(i * 97) % pods.length]!;
  e.upsertPod({ ...p, labels: { ...p.labels, app: `moved-${i}` } });
  e.flush();
}
console.log('per change', (performance.now() - t) / 40);
