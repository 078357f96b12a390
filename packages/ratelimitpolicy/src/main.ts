// ratelimitpolicy-controller: publishes EffectivePolicies and status for RateLimitPolicy.
import { KubeClient, PolicyController } from '@cascade/core';
import { KubeConfig } from '@kubernetes/client-node';
import { rateLimitPolicyKind } from './kind.ts';

const kc = new KubeConfig();
kc.loadFromDefault();
const controller = new PolicyController({
  client: new KubeClient(kc),
  kind: rateLimitPolicyKind,
  name: 'ratelimitpolicy-controller',
  leaseNamespace: process.env.POD_NAMESPACE ?? 'cascade-system',
  metricsPort: Number(process.env.METRICS_PORT ?? 8080),
});
await controller.start();
process.on('SIGTERM', () => void controller.stop().then(() => process.exit(0)));
