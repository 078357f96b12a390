// The network-policy API objects as plain data, validated with zod. Each kind keeps its own schema
// (NetworkPolicy v1, ANP/BANP v1alpha1, ClusterNetworkPolicy v1alpha2); rules.ts lowers them into
// one rule form. Unknown fields are ignored (Kubernetes prunes them); wrong types name the field.
import type { LabelSelector } from '@cascade/core';
import { z } from 'zod';

/** A LabelSelector's shape (operators and values are checked by validateSelector). */
export const labelSelectorSchema = z.object({
  matchLabels: z.record(z.string(), z.string()).optional(),
  matchExpressions: z
    .array(z.object({ key: z.string(), operator: z.string(), values: z.array(z.string()).optional() }))
    .optional(),
}) as unknown as z.ZodType<LabelSelector>;
const selector = labelSelectorSchema;

const protocol = z.enum(['TCP', 'UDP', 'SCTP']);
const portNumber = z.number().int().min(1).max(65535);

// ---- core objects --------------------------------------------------------------------------------

export const namespaceSchema = z.object({
  metadata: z.object({ name: z.string().min(1), labels: z.record(z.string(), z.string()).optional() }),
});

export const podSchema = z.object({
  metadata: z.object({
    name: z.string().min(1),
    namespace: z.string().optional(),
    labels: z.record(z.string(), z.string()).optional(),
    creationTimestamp: z.string().optional(),
  }),
  spec: z
    .object({
      nodeName: z.string().optional(),
      hostNetwork: z.boolean().optional(),
      containers: z
        .array(
          z.object({
            ports: z
              .array(
                z.object({
                  name: z.string().optional(),
                  containerPort: portNumber,
                  protocol: protocol.optional(),
                }),
              )
              .optional(),
          }),
        )
        .optional(),
    })
    .optional(),
  status: z
    .object({
      phase: z.string().optional(),
      podIP: z.string().optional(),
      podIPs: z.array(z.object({ ip: z.string() })).optional(),
    })
    .optional(),
});

export const nodeSchema = z.object({
  metadata: z.object({ name: z.string().min(1), labels: z.record(z.string(), z.string()).optional() }),
  status: z
    .object({ addresses: z.array(z.object({ type: z.string(), address: z.string() })).optional() })
    .optional(),
});

// ---- NetworkPolicy v1 ----------------------------------------------------------------------------

// strict: a misspelt field (`ingres:`) is an error, never a silently different policy (an empty
// ingress list would isolate the pods: deny-all)
const npPort = z.strictObject({
  protocol: protocol.optional(),
  port: z.union([portNumber, z.string().min(1)]).optional(),
  endPort: portNumber.optional(),
});
const npPeer = z.strictObject({
  podSelector: selector.optional(),
  namespaceSelector: selector.optional(),
  ipBlock: z.strictObject({ cidr: z.string(), except: z.array(z.string()).optional() }).optional(),
});
export const networkPolicySpecSchema = z.strictObject({
  podSelector: selector,
  policyTypes: z.array(z.enum(['Ingress', 'Egress'])).optional(),
  ingress: z
    .array(z.strictObject({ from: z.array(npPeer).optional(), ports: z.array(npPort).optional() }))
    .optional(),
  egress: z
    .array(z.strictObject({ to: z.array(npPeer).optional(), ports: z.array(npPort).optional() }))
    .optional(),
});
export type NetworkPolicySpec = z.infer<typeof networkPolicySpecSchema>;
export type NpPeer = z.infer<typeof npPeer>;
export type NpPort = z.infer<typeof npPort>;

// ---- AdminNetworkPolicy / BaselineAdminNetworkPolicy v1alpha1 ------------------------------------

const subject = z.object({
  namespaces: selector.optional(),
  pods: z.object({ namespaceSelector: selector, podSelector: selector }).optional(),
});

/** Ingress peers are namespaces or pods only; nodes and networks exist for egress. */
const anpIngressPeer = z.object({
  namespaces: selector.optional(),
  pods: z.object({ namespaceSelector: selector, podSelector: selector }).optional(),
});
const anpPeer = anpIngressPeer.extend({
  nodes: selector.optional(),
  networks: z.array(z.string()).max(25).optional(),
});
const anpPort = z.object({
  portNumber: z.object({ protocol: protocol.default('TCP'), port: portNumber }).optional(),
  namedPort: z.string().min(1).optional(),
  portRange: z.object({ protocol: protocol.default('TCP'), start: portNumber, end: portNumber }).optional(),
});
const anpRule = (actions: readonly [string, ...string[]], peerField: 'from' | 'to') =>
  z.object({
    name: z.string().max(100).optional(),
    action: z.enum(actions),
    [peerField]: z
      .array(peerField === 'from' ? anpIngressPeer : anpPeer)
      .min(1)
      .max(100),
    ports: z.array(anpPort).min(1).max(100).optional(),
  });
export const adminNetworkPolicySpecSchema = z.object({
  priority: z.number().int().min(0).max(1000),
  subject,
  ingress: z
    .array(anpRule(['Allow', 'Deny', 'Pass'], 'from'))
    .max(100)
    .optional(),
  egress: z
    .array(anpRule(['Allow', 'Deny', 'Pass'], 'to'))
    .max(100)
    .optional(),
});
export const baselineAdminNetworkPolicySpecSchema = z.object({
  subject,
  ingress: z
    .array(anpRule(['Allow', 'Deny'], 'from'))
    .max(100)
    .optional(),
  egress: z
    .array(anpRule(['Allow', 'Deny'], 'to'))
    .max(100)
    .optional(),
});
export type AnpSpec = z.infer<typeof adminNetworkPolicySpecSchema>;
export type AnpPeer = z.infer<typeof anpPeer>;
export type AnpPort = z.infer<typeof anpPort>;
export type Subject = z.infer<typeof subject>;

// ---- ClusterNetworkPolicy v1alpha2 ---------------------------------------------------------------

const destinationPort = z.object({
  number: portNumber.optional(),
  range: z.object({ start: portNumber, end: portNumber }).optional(),
});
const cnpProtocol = z.object({
  tcp: z.object({ destinationPort: destinationPort.optional() }).optional(),
  udp: z.object({ destinationPort: destinationPort.optional() }).optional(),
  sctp: z.object({ destinationPort: destinationPort.optional() }).optional(),
  destinationNamedPort: z.string().min(1).optional(),
});
// Unlike ANP's, a ClusterNetworkPolicy `pods` selector may omit namespaceSelector (network-policy-api
// v0.2.0 on: only podSelector is required): omitted, it selects pods of every namespace.
const cnpPods = z.object({ namespaceSelector: selector.optional(), podSelector: selector });
const cnpSubject = z.object({ namespaces: selector.optional(), pods: cnpPods.optional() });
const cnpIngressPeer = z.object({ namespaces: selector.optional(), pods: cnpPods.optional() });
const cnpPeer = cnpIngressPeer.extend({
  nodes: selector.optional(),
  networks: z.array(z.string()).max(25).optional(),
});
const cnpRule = (peerField: 'from' | 'to') =>
  z.object({
    name: z.string().max(100).optional(),
    action: z.enum(['Accept', 'Deny', 'Pass']),
    // As in ANP, ingress peers are namespaces or pods only (network-policy-api v0.2.x CRD).
    [peerField]: z
      .array(peerField === 'from' ? cnpIngressPeer : cnpPeer)
      .min(1)
      .max(25),
    protocols: z.array(cnpProtocol).min(1).max(25).optional(),
  });
export const clusterNetworkPolicySpecSchema = z.object({
  tier: z.enum(['Admin', 'Baseline']),
  priority: z.number().int().min(0).max(1000),
  subject: cnpSubject,
  ingress: z.array(cnpRule('from')).max(25).optional(),
  egress: z.array(cnpRule('to')).max(25).optional(),
});
export type CnpSpec = z.infer<typeof clusterNetworkPolicySpecSchema>;
export type CnpProtocol = z.infer<typeof cnpProtocol>;
/** An admin peer of either kind (ANP's always names its pods' namespaces; CNP's may not). */
export type AdminPeer = z.infer<typeof cnpPeer>;
export type AdminSubject = z.infer<typeof cnpSubject>;

// ---- the cluster as plain data -------------------------------------------------------------------

export interface ContainerPort {
  name?: string;
  port: number;
  protocol: 'TCP' | 'UDP' | 'SCTP';
}

export interface Pod {
  namespace: string;
  name: string;
  labels: Record<string, string>;
  ips: string[];
  node?: string;
  ports: ContainerPort[];
  /** creationTimestamp: when two live pods claim one address, the newest owns it. */
  created?: string;
}

export interface Node {
  name: string;
  labels: Record<string, string>;
  ips: string[];
}

export interface Namespace {
  name: string;
  labels: Record<string, string>;
}

export type PolicyKindName =
  | 'NetworkPolicy'
  | 'AdminNetworkPolicy'
  | 'BaselineAdminNetworkPolicy'
  | 'ClusterNetworkPolicy';

export interface NetPolicyObject {
  kind: PolicyKindName;
  namespace?: string;
  name: string;
  /** Raw spec; validated by the kind's schema when rules are built. */
  spec: unknown;
  creationTimestamp?: string;
}

export interface Cluster {
  namespaces: Namespace[];
  pods: Pod[];
  nodes: Node[];
  policies: NetPolicyObject[];
}

function zodMessage(e: z.ZodError, base: string): string {
  const i = e.issues[0]!;
  return `${[base, ...i.path.map(String)].join('.')}: ${i.message}`;
}

/** Kubernetes object (metadata/spec/status) -> Pod; field-named error on wrong types. */
export function podFromObject(o: unknown): Pod | { error: string } {
  const r = podSchema.safeParse(o);
  if (!r.success) return { error: zodMessage(r.error, '').replace(/^\./, '') };
  const p = r.data;
  // Only a running pod with a network of its own owns pod addresses: a finished pod's address may
  // already be another pod's, and a hostNetwork pod's address is its node's (node identity).
  const finished = p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed';
  const ips =
    finished || p.spec?.hostNetwork
      ? []
      : (p.status?.podIPs?.map((x) => x.ip) ?? (p.status?.podIP ? [p.status.podIP] : []));
  const pod: Pod = {
    namespace: p.metadata.namespace ?? 'default',
    name: p.metadata.name,
    labels: p.metadata.labels ?? {},
    ips,
    ports: (p.spec?.containers ?? []).flatMap((c) =>
      (c.ports ?? []).map((x) => ({
        ...(x.name ? { name: x.name } : {}),
        port: x.containerPort,
        protocol: x.protocol ?? 'TCP',
      })),
    ),
  };
  if (p.spec?.nodeName) pod.node = p.spec.nodeName;
  if (p.metadata.creationTimestamp) pod.created = p.metadata.creationTimestamp;
  return pod;
}

export function nodeFromObject(o: unknown): Node | { error: string } {
  const r = nodeSchema.safeParse(o);
  if (!r.success) return { error: zodMessage(r.error, '').replace(/^\./, '') };
  return {
    name: r.data.metadata.name,
    labels: r.data.metadata.labels ?? {},
    ips: (r.data.status?.addresses ?? [])
      .filter((a) => a.type === 'InternalIP' || a.type === 'ExternalIP')
      .map((a) => a.address),
  };
}

export function namespaceFromObject(o: unknown): Namespace | { error: string } {
  const r = namespaceSchema.safeParse(o);
  if (!r.success) return { error: zodMessage(r.error, '').replace(/^\./, '') };
  // The API server sets this label on every namespace; selectors commonly use it.
  return {
    name: r.data.metadata.name,
    labels: { ...(r.data.metadata.labels ?? {}), 'kubernetes.io/metadata.name': r.data.metadata.name },
  };
}

export { zodMessage };
