// Builds the engines from loaded manifests exactly as a controller would from its informers: each
// policy kind gets its own PolicyEngine over the same Gateway API objects.
import {
  PolicyEngine,
  type PolicyKind,
  type PolicyObject,
  type ReferenceGrant,
  referenceGrantFromObject,
} from '@cascade/core';
import { GATEWAY_POLICY_KINDS, POLICY_KIND_NAMES } from '@cascade/distribution';
import { convertTopology } from './gateway-api.ts';
import { type Manifest, where } from './load.ts';

/** The gateway kinds, from the distribution's manifest. */
export const POLICY_KINDS: readonly PolicyKind[] = GATEWAY_POLICY_KINDS;
/** Kuadrant manifests work after changing only apiVersion; offline we also take them as they are. */
const POLICY_API_VERSIONS = ['cascade.dev/v1alpha1', 'kuadrant.io/v1'];
/** Kinds Kuadrant still serves at another version (TokenRateLimitPolicy: kuadrant.io/v1alpha1). */
const KUADRANT_VERSIONS: Record<string, string> = { TokenRateLimitPolicy: 'kuadrant.io/v1alpha1' };
const apiVersionsOf = (kind: string) =>
  KUADRANT_VERSIONS[kind] ? ['cascade.dev/v1alpha1', KUADRANT_VERSIONS[kind]] : POLICY_API_VERSIONS;

export interface GatewayWorld {
  engines: Map<string, PolicyEngine>;
  /** Manifest of each policy by engine id (kind:ns/name), for source positions in messages. */
  policySources: Map<string, Manifest>;
  notes: string[];
  problems: string[];
  referenceGrants: ReferenceGrant[];
}

/** Kinds handled elsewhere (network policy) or known and deliberately ignored here. */
export const NETWORK_KINDS = new Set([
  'Pod',
  'Node',
  'Service',
  'EndpointSlice',
  ...POLICY_KIND_NAMES.filter((k) => k.side === 'network').map((k) => k.kind),
  'NetpolNodeReport',
]);

export function buildGatewayWorld(manifests: Manifest[], onlyKind?: string): GatewayWorld {
  const kinds = POLICY_KINDS.filter((k) => !onlyKind || k.kind === onlyKind);
  const world: GatewayWorld = {
    engines: new Map(kinds.map((k) => [k.kind, new PolicyEngine(k)])),
    policySources: new Map(),
    notes: [],
    problems: [],
    referenceGrants: [],
  };
  const engines = [...world.engines.values()];
  for (const m of manifests) {
    const t = convertTopology(m);
    if (t && 'error' in t) {
      world.problems.push(`${where(m.source)} (${m.kind} ${m.metadata.name}): ${t.error}`);
      continue;
    }
    if (t) {
      for (const e of engines) {
        if (t.kind === 'GatewayClass') e.upsertGatewayClass(t.value);
        else if (t.kind === 'Gateway') e.upsertGateway(t.value);
        else if (t.kind === 'Route') e.upsertRoute(t.value);
        else e.upsertNamespace(t.value);
      }
      continue;
    }
    if (m.kind === 'ReferenceGrant') {
      const g = referenceGrantFromObject(m);
      if ('error' in g)
        world.problems.push(`${where(m.source)} (ReferenceGrant ${m.metadata.name}): ${g.error}`);
      else world.referenceGrants.push(g);
      continue;
    }
    const policyKind = POLICY_KINDS.find((k) => k.kind === m.kind);
    if (policyKind) {
      if (!apiVersionsOf(m.kind).includes(m.apiVersion)) {
        world.problems.push(
          `${where(m.source)} (${m.kind} ${m.metadata.name}): apiVersion: "${m.apiVersion}" is not one of ${apiVersionsOf(m.kind).join(', ')}`,
        );
        continue;
      }
      const engine = world.engines.get(m.kind);
      if (!engine) continue; // filtered out by --kind
      const obj: PolicyObject = {
        apiVersion: m.apiVersion,
        kind: m.kind,
        metadata: { ...m.metadata, namespace: m.metadata.namespace ?? 'default' },
        spec: m.spec,
      };
      world.policySources.set(`${m.kind}:${obj.metadata.namespace}/${m.metadata.name}`, m);
      engine.upsertPolicy(obj);
      continue;
    }
    if (!NETWORK_KINDS.has(m.kind))
      world.notes.push(`${where(m.source)}: ignoring unknown kind ${m.kind} (${m.apiVersion})`);
  }
  for (const e of engines) e.flush();
  return world;
}
