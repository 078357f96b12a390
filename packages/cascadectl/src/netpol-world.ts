// Network-policy objects from manifests -> a NetpolEngine, with file/document positions for problems.
import {
  type NetPolicyObject,
  NetpolEngine,
  NodeAddresses,
  namespaceFromObject,
  nodeFromObject,
  nodeReportFromObject,
  podFromObject,
  ServiceCatalog,
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

export function buildNetpolWorld(manifests: Manifest[]): NetpolWorld {
  const engine = new NetpolEngine({ ...foreignIdentityCap(), ...tenantLabel() });
  const services = new ServiceCatalog();
  // Service budgets shared per tenant, as on a node
  services.setTenants((ns) => engine.tenantOf(ns));
  const problems: string[] = [];
  const sources = new Map<string, string>();
  const bridges = new Map<string, readonly string[]>();
  const nodes = new NodeAddresses(engine);
  const raw = (m: Manifest) => ({ metadata: m.metadata, spec: m.spec, status: m.status });
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
        // a Pending pod (being scheduled or started) has no address yet, and a host-network pod owns
        // none (it is the node): normal in a live cluster
        const hostNetwork = (m.spec as { hostNetwork?: boolean } | undefined)?.hostNetwork === true;
        if (!hostNetwork && (m.status as { phase?: string } | undefined)?.phase !== 'Pending')
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
      const built = engine.upsertPolicy(obj);
      sources.set(built.key, at);
    }
  }
  engine.flush();
  for (const p of engine.problems()) {
    const at = sources.get(p.policy) ?? p.policy;
    // a NetworkPolicy with an error keeps isolating its pods (fail closed, said in its warning)
    const ignored = p.policy.startsWith('NetworkPolicy/') ? 'its rules ignored' : 'policy ignored';
    for (const e of p.errors) problems.push(`${at}: ${e} (${ignored})`);
    for (const w of p.warnings) problems.push(`${at}: warning: ${w}`);
  }
  return { engine, services, problems, sources, reported: { bridges, tunnels: nodes.tunnels } };
}
