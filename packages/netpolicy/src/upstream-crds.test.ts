// Our zod schemas against the upstream CRDs (taken from the pinned network-policy-api module by the
// set-up step): every field we read must exist upstream, and every upstream field is either read or
// listed here as deliberately not supported, so a version bump shows what changed.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { apiServerTestsEnabled, envtestPaths } from '@cascade/envtest';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { z } from 'zod';
import {
  adminNetworkPolicySpecSchema,
  baselineAdminNetworkPolicySpecSchema,
  clusterNetworkPolicySpecSchema,
} from './model.ts';

type Schema = { properties?: Record<string, Schema>; items?: Schema; additionalProperties?: Schema };

function paths(s: Schema | undefined, base: string, out: Set<string>): Set<string> {
  if (!s) return out;
  for (const [k, v] of Object.entries(s.properties ?? {})) {
    const p = `${base}.${k}`;
    out.add(p);
    paths(v, p, out);
  }
  if (s.items) paths(s.items, `${base}[]`, out);
  return out;
}

function upstream(file: string): Set<string> {
  const crd = parse(readFileSync(join(envtestPaths()!.crds, file), 'utf8')) as {
    spec: { versions: { schema: { openAPIV3Schema: { properties: { spec: Schema } } } }[] };
  };
  return paths(crd.spec.versions[0]!.schema.openAPIV3Schema.properties.spec, 'spec', new Set());
}

function ours(schema: z.ZodType): Set<string> {
  return paths(z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Schema, 'spec', new Set());
}

/**
 * Upstream fields we knowingly do not read. domainNames (FQDN egress peers) need DNS-aware enforcement;
 * a peer with only domainNames has no field we know, so it fails closed and is reported.
 */
const NOT_SUPPORTED = new Set<string>(['spec.egress[].to[].domainNames']);

describe.skipIf(!apiServerTestsEnabled())('zod schemas vs upstream network-policy-api CRDs', () => {
  it.each([
    [
      'AdminNetworkPolicy',
      'policy.networking.k8s.io_adminnetworkpolicies.yaml',
      adminNetworkPolicySpecSchema,
    ],
    [
      'BaselineAdminNetworkPolicy',
      'policy.networking.k8s.io_baselineadminnetworkpolicies.yaml',
      baselineAdminNetworkPolicySpecSchema,
    ],
    [
      'ClusterNetworkPolicy (v1alpha2, network-policy-api v0.2.x)',
      'policy.networking.k8s.io_clusternetworkpolicies.yaml',
      clusterNetworkPolicySpecSchema,
    ],
  ])('%s: no invented field, no unlisted upstream field', (_kind, file, schema) => {
    const up = upstream(file);
    const mine = ours(schema as z.ZodType);
    expect([...mine].filter((p) => !up.has(p))).toEqual([]);
    expect([...up].filter((p) => !mine.has(p) && !NOT_SUPPORTED.has(p))).toEqual([]);
  });
});
