// Network-policy objects from manifests -> a NetpolEngine, with file/document positions for problems.

import { EFFECTIVE_GROUP } from '@cascade/core';
import {
  applyStaged,
  isStagedKind,
  type NetPolicyObject,
  NetpolEngine,
  NodeAddresses,
  namespaceFromObject,
  nodeFromObject,
  nodeReportFromObject,
  podFromObject,
  policyKey,
  ServiceCatalog,
  STAGED_VERSION,
  type StagedPolicy,
  stagedFromObject,
  stagedTarget,
  validTenantLabel,
} from '@cascade/netpolicy';
import { UsageError } from './cli.ts';
import { type Manifest, where } from './load.ts';

const POLICY_KINDS: Record<string, string[]> = {
  NetworkPolicy: ['networking.k8s.io/v1'],
  AdminNetworkPolicy: ['policy.networking.k8s.io/v1alpha1'],
  BaselineAdminNetworkPolicy: ['policy.networking.k8s.io/v1alpha1'],
  // v1beta1 since network-policy-api v0.3.0 (the same schema), v1alpha2 before and still served
  ClusterNetworkPolicy: ['policy.networking.k8s.io/v1beta1', 'policy.networking.k8s.io/v1alpha2'],
};

export interface NetpolWorld {
  engine: NetpolEngine;
  /** Services and EndpointSlices: a destination `svc:ns/name` (or a ClusterIP) is answered per backend */
  services: ServiceCatalog;
  problems: string[];
  /** policy key -> manifest position */
  sources: Map<string, string>;
  /** What the nodes' NetpolNodeReports say of their addresses. */
  reported: ReportedAddresses;
  /** The staged objects read (applied only when built with `staged`), each with its position. */
  staged: { policy: StagedPolicy; at: string }[];
  /** policy key -> the staged object that set it (only when built with `staged`) */
  stagedBy: Map<string, string>;
}

/** Node name -> addresses, as each node's NetpolNodeReport says (the agent reads them on the node). */
export interface ReportedAddresses {
  /** its pod bridges': the source a backend there sees for a NodePort flow masqueraded on that node */
  bridges: ReadonlyMap<string, readonly string[]>;
  /**
   * its tunnel devices' (flannel.1): the source a backend on another node sees for a NodePort flow
   * masqueraded on that node, and the node's own addresses besides its Node's
   */
  tunnels: ReadonlyMap<string, readonly string[]>;
}

/**
 * The identity cap the agents run with (engine/identity-cap.ts): $CASCADE_FOREIGN_IDENTITY_CAP, the
 * agent's own variable, or the default. A value that is not a whole number is a usage error.
 */
function foreignIdentityCap(): { foreignIdentityCap?: number } {
  const v = process.env.CASCADE_FOREIGN_IDENTITY_CAP;
  if (v === undefined || v === '') return {};
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 1_000_000)
    throw new UsageError(
      `CASCADE_FOREIGN_IDENTITY_CAP: "${v.slice(0, 20)}" is not a whole number from 1 to 1000000`,
    );
  return { foreignIdentityCap: n };
}

/**
 * The tenant label the agents run with (engine/tenants.ts): $CASCADE_TENANT_LABEL, the agent's own
 * variable, or the default. A value that is not a label key is a usage error.
 */
function tenantLabel(): { tenantLabel?: string } {
  const v = process.env.CASCADE_TENANT_LABEL;
  if (v === undefined) return {};
  if (!validTenantLabel(v))
    throw new UsageError(`CASCADE_TENANT_LABEL: "${v.slice(0, 80)}" is not a label key`);
  return { tenantLabel: v };
}

/**
 * The engine of these manifests. `staged`: the staged set instead of the enforced one (every
 * Staged* object's action applied, or those the function picks: engine/staged.ts); either way staged
 * objects are read and checked.
 */
export function buildNetpolWorld(
  manifests: Manifest[],
  opts: { staged?: boolean | ((s: StagedPolicy) => boolean) } = {},
): NetpolWorld {
  const engine = new NetpolEngine({ ...foreignIdentityCap(), ...tenantLabel() });
  const services = new ServiceCatalog();
  // Service budgets shared per tenant, as on a node
  services.setTenants((ns) => engine.tenantOf(ns));
  const problems: string[] = [];
  const sources = new Map<string, string>();
  const bridges = new Map<string, readonly string[]>();
  const nodes = new NodeAddresses(engine);
  const raw = (m: Manifest) => ({ metadata: m.metadata, spec: m.spec, status: m.status });
  const policies = new Map<string, NetPolicyObject>();
  const staged: { policy: StagedPolicy; at: string }[] = [];
  for (const m of manifests) {
    const at = `${where(m.source)} (${m.kind} ${m.metadata.namespace ? `${m.metadata.namespace}/` : ''}${m.metadata.name})`;
    if (m.kind === 'Namespace') {
      const ns = namespaceFromObject(raw(m));
      if ('error' in ns) problems.push(`${at}: ${ns.error}`);
      else engine.upsertNamespace(ns);
    } else if (m.kind === 'Pod') {
      const p = podFromObject(raw(m));
      if ('error' in p) problems.push(`${at}: ${p.error}`);
      else if (p.ips.length === 0) {
        // a Pending pod (being scheduled or started) has no address yet, a host-network pod owns none
        // (it is the node), and a pod being deleted or finished may have lost its own (its sandbox
        // gone): normal in a live cluster, and none of them sends or receives
        const hostNetwork = (m.spec as { hostNetwork?: boolean } | undefined)?.hostNetwork === true;
        const phase = (m.status as { phase?: string } | undefined)?.phase;
        const leaving =
          m.metadata.deletionTimestamp !== undefined || phase === 'Succeeded' || phase === 'Failed';
        if (!hostNetwork && !leaving && phase !== 'Pending')
          problems.push(`${at}: status.podIP: the pod has no address yet; left out`);
      } else engine.upsertPod(p);
    } else if (m.kind === 'Service' || m.kind === 'EndpointSlice') {
      const error = services.apply(m.kind, { metadata: m.metadata, spec: m.spec, ...m.body });
      if (error) problems.push(`${at}: ${error.slice(error.indexOf(': ') + 2)}`);
    } else if (m.kind === 'Node') {
      const n = nodeFromObject(raw(m));
      if ('error' in n) problems.push(`${at}: ${n.error}`);
      else nodes.node(n.name, n);
    } else if (m.kind === 'NetpolNodeReport') {
      const r = nodeReportFromObject(raw(m));
      if ('error' in r) problems.push(`${at}: ${r.error}; its pod-bridge and tunnel addresses left out`);
      else {
        if (r.podBridgeAddresses?.length) bridges.set(m.metadata.name, r.podBridgeAddresses);
        // the node's tunnel addresses are the node's (as every agent counts them)
        nodes.report(m.metadata.name, r.tunnelAddresses);
      }
    } else if (POLICY_KINDS[m.kind]) {
      if (!POLICY_KINDS[m.kind]!.includes(m.apiVersion)) {
        problems.push(`${at}: apiVersion: "${m.apiVersion}" is not ${POLICY_KINDS[m.kind]!.join(' or ')}`);
        continue;
      }
      const obj: NetPolicyObject = {
        kind: m.kind as NetPolicyObject['kind'],
        name: m.metadata.name,
        spec: m.spec,
      };
      if (m.kind === 'NetworkPolicy') obj.namespace = m.metadata.namespace ?? 'default';
      const key = policyKey(obj);
      policies.set(key, obj);
      sources.set(key, at);
    } else if (isStagedKind(m.kind)) {
      const want = `${EFFECTIVE_GROUP}/${STAGED_VERSION}`;
      if (m.apiVersion !== want) {
        problems.push(`${at}: apiVersion: "${m.apiVersion}" is not ${want}`);
        continue;
      }
      const s = stagedFromObject(m.kind, {
        metadata: {
          ...m.metadata,
          namespace: m.kind === 'StagedNetworkPolicy' ? (m.metadata.namespace ?? 'default') : undefined,
        },
        spec: m.spec,
      });
      if ('error' in s) problems.push(`${at}: ${s.error} (staged policy ignored)`);
      else staged.push({ policy: s, at });
    }
  }
  const stagedBy = new Map<string, string>();
  let judged: Map<string, NetPolicyObject> = policies;
  if (opts.staged) {
    const only = typeof opts.staged === 'function' ? opts.staged : () => true;
    const applied = applyStaged(
      policies,
      staged.filter((s) => only(s.policy)).map((s) => s.policy),
    );
    judged = applied.policies;
    for (const p of applied.problems)
      problems.push(`${staged.find((s) => s.policy === p.staged)!.at}: ${p.error}`);
    for (const s of staged)
      if (s.policy.action === 'Set' && only(s.policy)) {
        sources.set(stagedTarget(s.policy), `${s.at} [staged]`);
        stagedBy.set(stagedTarget(s.policy), s.at);
      }
  }
  for (const obj of judged.values()) engine.upsertPolicy(obj);
  engine.flush();
  for (const p of engine.problems()) {
    const at = sources.get(p.policy) ?? p.policy;
    // a NetworkPolicy with an error keeps isolating its pods (fail closed, said in its warning)
    const ignored = p.policy.startsWith('NetworkPolicy/') ? 'its rules ignored' : 'policy ignored';
    for (const e of p.errors) problems.push(`${at}: ${e} (${ignored})`);
    for (const w of p.warnings) problems.push(`${at}: warning: ${w}`);
  }
  return {
    engine,
    services,
    problems,
    sources,
    reported: { bridges, tunnels: nodes.tunnels },
    staged,
    stagedBy,
  };
}
