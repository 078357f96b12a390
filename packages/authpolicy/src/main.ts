// authpolicy-controller: publishes EffectivePolicies and status for AuthPolicy.
import { runPolicyController } from '@cascade/core';
import { wiringGaps } from '@cascade/wiring';
import { authPolicyKind } from './kind.ts';

await runPolicyController(authPolicyKind, 'authpolicy-controller', [], wiringGaps);
