// authpolicy-controller: publishes EffectivePolicies and status for AuthPolicy.
import { runPolicyController } from '@cascade/core';
import { decisionPointFlags, wiringGapsFor } from '@cascade/wiring';
import { authPolicyKind } from './kind.ts';

await runPolicyController(
  authPolicyKind,
  'authpolicy-controller',
  decisionPointFlags('auth'),
  wiringGapsFor('auth'),
);
