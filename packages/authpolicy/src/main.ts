// authpolicy-controller: publishes EffectivePolicies and status for AuthPolicy.
import { KubeClient, PolicyController } from '@cascade/core';
import { KubeConfig } from '@kubernetes/client-node';
import { authPolicyKind } from './kind.ts';

const kc = new KubeConfig();
kc.loadFromDefault();
const controller = new PolicyController({
  client: new KubeClient(kc),
  kind: authPolicyKind,
  name: 'authpolicy-controller',
  leaseNamespace: process.env.POD_NAMESPACE ?? 'cascade-system',
  metricsPort: Number(process.env.METRICS_PORT ?? 8080),
});
await controller.start();
process.on('SIGTERM', () => void controller.stop().then(() => process.exit(0)));
