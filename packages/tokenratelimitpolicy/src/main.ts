// tokenratelimitpolicy-controller: publishes EffectivePolicies, status and the Limitador token limits
// for TokenRateLimitPolicy.
import { runPolicyController } from '@cascade/core';
import { decisionPointFlags, wiringGapsFor } from '@cascade/wiring';
import { tokenRateLimitPolicyKind } from './kind.ts';

await runPolicyController(
  tokenRateLimitPolicyKind,
  'tokenratelimitpolicy-controller',
  [
    {
      flag: 'limitador-namespace',
      key: 'limitadorNamespace',
      default: 'kuadrant-system',
      help: 'namespace of Limitador: every token limits ConfigMap goes there ("" : beside its gateway)',
    },
    ...decisionPointFlags('ratelimit'),
  ],
  wiringGapsFor('ratelimit'),
);
