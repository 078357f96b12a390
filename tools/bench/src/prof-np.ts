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
const t = performance.now();
NetpolEngine.fromCluster(cluster);
console.log('full', performance.now() - t);
