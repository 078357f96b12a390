// AuthPolicy: resolution + Authorino AuthConfig rendering at 20,000 routes / 10,000 policies. The
// generated rate-limit world is turned into auth rules of the same shape (same names, same D/O
// blocks): each named limit becomes a named authentication rule.
import { authPolicyKind } from '@cascade/authpolicy';
import type { PolicyObject } from '@cascade/core';
import { generateGatewayWorld } from '../gateway-topology.ts';
import { KIND_SCALE, runKind } from '../kinds-common.ts';
import type { Figure } from '../report.ts';

type Block = Record<string, unknown> & { limits?: Record<string, { rates: { limit: number }[] }> };

function toAuth(block: Block): Record<string, unknown> {
  const { limits, condition: _c, ...rest } = block;
  if (!limits) return rest;
  const authentication: Record<string, unknown> = {};
  for (const [name, v] of Object.entries(limits))
    authentication[name === '*' ? 'platform' : name] = {
      jwt: { issuerUrl: `https://issuer.example.com/${v.rates[0]!.limit}` },
    };
  return { ...rest, rules: { authentication } };
}

function authWorld() {
  const w = generateGatewayWorld(KIND_SCALE, 'AuthPolicy');
  w.policies = w.policies.map((p) => {
    const spec = p.spec as Block & { defaults?: Block; overrides?: Block };
    const next: Record<string, unknown> = toAuth(spec);
    if (spec.defaults) next.defaults = toAuth(spec.defaults);
    if (spec.overrides) next.overrides = toAuth(spec.overrides);
    return { ...p, spec: next };
  });
  return w;
}

function bump(p: PolicyObject, n: number): PolicyObject {
  const spec = structuredClone(p.spec) as Record<
    string,
    { rules?: { authentication: Record<string, unknown> } }
  >;
  const block = (spec.overrides ?? spec.defaults ?? spec) as {
    rules: { authentication: Record<string, unknown> };
  };
  const first = Object.keys(block.rules.authentication)[0]!;
  block.rules.authentication[first] = { jwt: { issuerUrl: `https://changed.example.com/${n}` } };
  return { ...p, spec };
}

export async function run(): Promise<Figure[]> {
  return runKind('authpolicy', authPolicyKind, authWorld(), bump);
}
