// Our zod schemas against the upstream CRDs (taken from the pinned network-policy-api module by the
// set-up step): every field we read must exist upstream, and every upstream field is either read or
// listed here as deliberately not supported, so a version bump shows what changed.
import {
  apiServerTestsEnabled,
  requiredPaths,
  type SchemaNode,
  schemaPaths,
  upstreamSpecPaths,
  upstreamSpecRequired,
} from '@cascade/envtest';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  adminNetworkPolicySpecSchema,
  baselineAdminNetworkPolicySpecSchema,
  clusterNetworkPolicySpecSchema,
} from './model.ts';

const upstream = (file: string, version?: string) => upstreamSpecPaths(file, version);
const json = (schema: z.ZodType) =>
  z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as SchemaNode;
const ours = (schema: z.ZodType) => schemaPaths(json(schema));

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
      undefined,
      adminNetworkPolicySpecSchema,
    ],
    [
      'BaselineAdminNetworkPolicy',
      'policy.networking.k8s.io_baselineadminnetworkpolicies.yaml',
      undefined,
      baselineAdminNetworkPolicySpecSchema,
    ],
    // network-policy-api v0.3.x serves both, v1beta1 stored; Cascade reads whichever is served
    [
      'ClusterNetworkPolicy v1beta1 (network-policy-api v0.3.x)',
      'policy.networking.k8s.io_clusternetworkpolicies.yaml',
      'v1beta1',
      clusterNetworkPolicySpecSchema,
    ],
    [
      'ClusterNetworkPolicy v1alpha2 (network-policy-api v0.3.x, as v0.2.x)',
      'policy.networking.k8s.io_clusternetworkpolicies.yaml',
      'v1alpha2',
      clusterNetworkPolicySpecSchema,
    ],
  ])('%s: no invented field, no unlisted upstream field', (_kind, file, version, schema) => {
    const up = upstream(file, version);
    const mine = ours(schema as z.ZodType);
    expect([...mine].filter((p) => !up.has(p))).toEqual([]);
    expect([...up].filter((p) => !mine.has(p) && !NOT_SUPPORTED.has(p))).toEqual([]);
    // never require what upstream leaves optional (a valid object refused: CNP pods without
    // namespaceSelector were, until v0.3.0's suite showed it)
    const upRequired = upstreamSpecRequired(file, version);
    expect([...requiredPaths(json(schema as z.ZodType))].filter((p) => !upRequired.has(p))).toEqual([]);
  });
});
