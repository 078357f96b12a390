// ratelimitpolicy-controller: publishes EffectivePolicies and status for RateLimitPolicy.
import { runPolicyController } from '@cascade/core';
import { decisionPointFlags, wiringGapsFor } from '@cascade/wiring';
import { rateLimitPolicyKind } from './kind.ts';

await runPolicyController(
  rateLimitPolicyKind,
  'ratelimitpolicy-controller',
  [
    {
      flag: 'limitador-namespace',
      key: 'limitadorNamespace',
      default: 'kuadrant-system',
      help: 'namespace of Limitador: every limits ConfigMap goes there ("" : beside its gateway)',
    },
    {
      flag: 'limitador-cr',
      key: 'limitadorCr',
      default: '',
      help: 'name of limitador-operator\'s Limitador in that namespace: its spec.limits gets every gateway\'s limits ("": not written)',
    },
    ...decisionPointFlags('ratelimit'),
  ],
  wiringGapsFor('ratelimit'),
);
