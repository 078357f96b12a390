// The topology's zod schemas against the upstream Gateway API CRDs (standard channel, taken from the
// pinned sigs.k8s.io/gateway-api module by the set-up step): every field we read exists upstream,
// and every upstream field we do not read is listed here as irrelevant to policy attachment, so a
// version bump that adds a field shows up as a failing test to decide on.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { apiServerTestsEnabled, envtestPaths } from '@cascade/envtest';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { z } from 'zod';
import { gatewaySpec, routeSpec } from './from-k8s.ts';

type Schema = { properties?: Record<string, Schema>; items?: Schema };

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
    spec: { versions: { name: string; schema: { openAPIV3Schema: { properties: { spec: Schema } } } }[] };
  };
  const v1 = crd.spec.versions.find((v) => v.name === 'v1')!;
  return paths(v1.schema.openAPIV3Schema.properties.spec, 'spec', new Set());
}

const ours = (schema: z.ZodType) =>
  paths(z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Schema, 'spec', new Set());

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
    'spec.rules[].matches', // request matching: policies attach per rule, not per match
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
