// The topology's zod schemas against the upstream Gateway API CRDs (standard channel, taken from the
// pinned sigs.k8s.io/gateway-api module by the set-up step): every field we read exists upstream,
// and every upstream field we do not read is listed here as irrelevant to policy attachment, so a
// version bump that adds a field shows up as a failing test to decide on.
import { apiServerTestsEnabled, type SchemaNode, schemaPaths, upstreamSpecPaths } from '@cascade/envtest';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { gatewaySpec, routeSpec } from './from-k8s.ts';

const upstream = (file: string) => upstreamSpecPaths(file, 'v1');
const ours = (schema: z.ZodType) =>
  schemaPaths(z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as SchemaNode);

/** Upstream fields (and everything under them) that do not change where a policy attaches. */
const IRRELEVANT: Record<string, string[]> = {
  Gateway: [
    'spec.addresses', // data-plane addresses
    'spec.infrastructure', // provisioning hints
    'spec.listeners[].tls', // certificates; the listener's hostname and port are what attach
  ],
  Route: [
    'spec.rules[].backendRefs', // where traffic goes, not which policies apply
    'spec.rules[].filters',
    'spec.rules[].matches', // read for the data-plane wiring by ruleMatches (from-k8s.ts), with its own schemas
    'spec.rules[].timeouts',
    'spec.rules[].retry',
    'spec.rules[].sessionPersistence',
  ],
};
const ignored = (kind: string, p: string) =>
  IRRELEVANT[kind]!.some(
    (prefix) => p === prefix || p.startsWith(`${prefix}.`) || p.startsWith(`${prefix}[]`),
  );

describe.skipIf(!apiServerTestsEnabled())('topology schemas vs upstream Gateway API CRDs', () => {
  it.each([
    ['Gateway', 'gateway.networking.k8s.io_gateways.yaml', gatewaySpec],
    ['HTTPRoute', 'gateway.networking.k8s.io_httproutes.yaml', routeSpec],
    ['GRPCRoute', 'gateway.networking.k8s.io_grpcroutes.yaml', routeSpec],
  ])(
    '%s: every field read exists upstream; every other upstream field is listed as irrelevant',
    (kind, file, schema) => {
      const up = upstream(file);
      const mine = ours(schema as z.ZodType);
      const group = kind === 'Gateway' ? 'Gateway' : 'Route';
      // selector internals of allowedRoutes are read through a generic LabelSelector shape
      expect([...mine].filter((p) => !up.has(p))).toEqual([]);
      expect([...up].filter((p) => !mine.has(p) && !ignored(group, p))).toEqual([]);
    },
  );
});
