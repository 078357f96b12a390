// Every network-policy kind lowered into one rule form: tier, direction, action, subject, peers,
// ports, and the position that orders it. Validation never throws: an invalid policy is reported and
// left out; a peer or port that cannot match is kept as fail-closed and reported as a warning.
import { type LabelSelector, validateSelector } from '@cascade/core';
import { z } from 'zod';
import { contains, formatPrefix, type Prefix, parseCidr, parseIp } from './cidr.ts';
import {
  type AdminPeer,
  type AdminSubject,
  type AnpPort,
  adminNetworkPolicySpecSchema,
  baselineAdminNetworkPolicySpecSchema,
  type CnpProtocol,
  clusterNetworkPolicySpecSchema,
  labelSelectorSchema,
  type NetPolicyObject,
  type NetworkPolicySpec,
  type NpPeer,
  type NpPort,
  networkPolicySpecSchema,
  zodMessage,
} from './model.ts';
import { type PortRange, PROTO } from './ports.ts';

export type Tier = 'admin' | 'np' | 'baseline';
export type Action = 'allow' | 'deny' | 'pass';
export type Direction = 'ingress' | 'egress';

export type NamespaceMatch = { name: string } | { selector: LabelSelector };

export type Peer =
  /** Every endpoint and address (a NetworkPolicy rule without from/to). */
  | { kind: 'all' }
  | { kind: 'pods'; namespaces: NamespaceMatch; pods: LabelSelector }
  /**
   * ipBlock / networks. `pods`: also matches pod addresses: NetworkPolicy ipBlock (upstream semantics,
   * as the Kubernetes e2e tests, Calico, Antrea and kube-network-policies read it) and ANP networks.
   */
  | { kind: 'cidr'; cidr: Prefix; except: Prefix[]; pods: boolean; text: string }
  | { kind: 'nodes'; selector: LabelSelector }
  /** A peer with no known field (fail closed): matches nothing in Allow, everything in Deny/Pass. */
  | { kind: 'unknown' };

export type PortMatch =
  | { kind: 'range'; proto: number; range: PortRange }
  | { kind: 'named'; proto?: number; name: string };

export interface SubjectMatch {
  namespaces: NamespaceMatch;
  pods: LabelSelector;
}

export interface RuleSource {
  kind: NetPolicyObject['kind'];
  namespace?: string;
  name: string;
  direction: Direction;
  index: number;
  ruleName?: string;
}

export interface Rule {
  /** `Kind[/ns]/name#direction[index]` */
  id: string;
  source: RuleSource;
  tier: Tier;
  direction: Direction;
  action: Action;
  /** Sort key inside the tier, lower first: [priority, kind order, name order, rule index]. */
  order: [number, number, string, number];
  /** ANP/CNP priority, for explain. */
  priority?: number;
  subject: SubjectMatch;
  peers: Peer[];
  /** undefined: every protocol and port. */
  ports?: PortMatch[];
}

/** NetworkPolicy isolation: pods a NetworkPolicy selects, per direction. */
export interface Isolation {
  policy: string;
  namespace: string;
  subject: LabelSelector;
  directions: Direction[];
}

export interface BuiltPolicy {
  key: string;
  rules: Rule[];
  isolation?: Isolation;
  errors: string[];
  warnings: string[];
}

const ANY: LabelSelector = {};
const protoOf = (p: string | undefined): number => PROTO[(p ?? 'TCP') as keyof typeof PROTO];

/** The key the engine gives a policy: `Kind/namespace/name` or `Kind/name`. */
export function policyKey(o: NetPolicyObject): string {
  return o.namespace ? `${o.kind}/${o.namespace}/${o.name}` : `${o.kind}/${o.name}`;
}

function checkSelectors(obj: unknown, base: string, errors: string[]): void {
  if (Array.isArray(obj)) obj.forEach((x, i) => checkSelectors(x, `${base}[${i}]`, errors));
  else if (obj && typeof obj === 'object') {
    for (const [k, v] of Object.entries(obj)) {
      if (
        v &&
        typeof v === 'object' &&
        ('matchExpressions' in v || 'matchLabels' in v) &&
        /selector|Selector|namespaces|nodes/.test(k)
      ) {
        errors.push(...validateSelector(v as LabelSelector, `${base}.${k}`));
      }
      checkSelectors(v, `${base}.${k}`, errors);
    }
  }
}

function cidrPeer(
  text: string,
  except: string[],
  pods: boolean,
  field: string,
  errors: string[],
): Peer | undefined {
  const cidr = parseCidr(text);
  if (!cidr) {
    errors.push(`${field}: "${text}" is not a valid CIDR`);
    return undefined;
  }
  const ex: Prefix[] = [];
  except.forEach((e, i) => {
    const p = parseCidr(e);
    if (!p) errors.push(`${field}.except[${i}]: "${e}" is not a valid CIDR`);
    else if (!contains(cidr, p) || p.len === cidr.len)
      errors.push(`${field}.except[${i}]: ${e} is not strictly inside ${text}`);
    else ex.push(p);
  });
  return { kind: 'cidr', cidr, except: ex, pods, text };
}

// ---- NetworkPolicy -------------------------------------------------------------------------------

function npPeers(peers: NpPeer[] | undefined, ns: string, field: string, errors: string[]): Peer[] {
  if (!peers || peers.length === 0) return [{ kind: 'all' }];
  const out: Peer[] = [];
  peers.forEach((p, i) => {
    const f = `${field}[${i}]`;
    const set = [p.podSelector, p.namespaceSelector, p.ipBlock].filter((x) => x !== undefined).length;
    if (p.ipBlock && set > 1)
      errors.push(`${f}: ipBlock cannot be combined with podSelector or namespaceSelector`);
    else if (p.ipBlock) {
      const c = cidrPeer(p.ipBlock.cidr, p.ipBlock.except ?? [], true, `${f}.ipBlock`, errors);
      if (c) out.push(c);
    } else if (set === 0) errors.push(`${f}: a peer needs podSelector, namespaceSelector or ipBlock`);
    else {
      out.push({
        kind: 'pods',
        namespaces: p.namespaceSelector ? { selector: p.namespaceSelector } : { name: ns },
        pods: p.podSelector ?? ANY,
      });
    }
  });
  return out;
}

function npPorts(ports: NpPort[] | undefined, field: string, errors: string[]): PortMatch[] | undefined {
  if (!ports || ports.length === 0) return undefined;
  const out: PortMatch[] = [];
  ports.forEach((p, i) => {
    const proto = protoOf(p.protocol);
    if (p.port === undefined) {
      if (p.endPort !== undefined) errors.push(`${field}[${i}].endPort: requires a numeric port`);
      else out.push({ kind: 'range', proto, range: { start: 1, end: 65535 } });
    } else if (typeof p.port === 'string') {
      if (p.endPort !== undefined) errors.push(`${field}[${i}].endPort: cannot be used with a named port`);
      else if (/^\d+$/.test(p.port))
        errors.push(`${field}[${i}].port: "${p.port}" must be a number, not a numeric string`);
      else out.push({ kind: 'named', proto, name: p.port });
    } else if (p.endPort !== undefined && p.endPort < p.port) {
      errors.push(`${field}[${i}].endPort: ${p.endPort} is below port ${p.port}`);
    } else out.push({ kind: 'range', proto, range: { start: p.port, end: p.endPort ?? p.port } });
  });
  return out;
}

function buildNetworkPolicy(o: NetPolicyObject, spec: NetworkPolicySpec, out: BuiltPolicy): void {
  const ns = o.namespace ?? 'default';
  const types =
    spec.policyTypes ?? (spec.egress && spec.egress.length > 0 ? ['Ingress', 'Egress'] : ['Ingress']);
  const directions = [...new Set(types)].map((t) => t.toLowerCase() as Direction);
  out.isolation = { policy: out.key, namespace: ns, subject: spec.podSelector, directions };
  const subject: SubjectMatch = { namespaces: { name: ns }, pods: spec.podSelector };
  for (const d of directions) {
    const list = d === 'ingress' ? spec.ingress : spec.egress;
    (list ?? []).forEach((r, i) => {
      const field = `spec.${d}[${i}]`;
      const peers = npPeers(
        d === 'ingress' ? (r as { from?: NpPeer[] }).from : (r as { to?: NpPeer[] }).to,
        ns,
        `${field}.${d === 'ingress' ? 'from' : 'to'}`,
        out.errors,
      );
      const ports = npPorts(r.ports, `${field}.ports`, out.errors);
      out.rules.push({
        id: `${out.key}#${d}[${i}]`,
        source: { kind: o.kind, namespace: ns, name: o.name, direction: d, index: i },
        tier: 'np',
        direction: d,
        action: 'allow',
        order: [0, 0, out.key, i],
        subject,
        peers,
        ...(ports ? { ports } : {}),
      });
    });
  }
}

// ---- ANP / BANP / CNP --------------------------------------------------------------------------

function subjectMatch(s: AdminSubject, field: string, errors: string[]): SubjectMatch {
  if (s.namespaces && s.pods) errors.push(`${field}: set exactly one of namespaces or pods`);
  // a pods selector without namespaceSelector (ClusterNetworkPolicy only): every namespace
  if (s.pods) return { namespaces: { selector: s.pods.namespaceSelector ?? {} }, pods: s.pods.podSelector };
  if (s.namespaces) return { namespaces: { selector: s.namespaces }, pods: ANY };
  errors.push(`${field}: set exactly one of namespaces or pods`);
  return { namespaces: { selector: { matchLabels: { '\u0000never': '\u0000' } } }, pods: ANY };
}

/**
 * `masked`: a network with host bits set (10.1.2.3/8) is enforced as its network (10.0.0.0/8), as it
 * always was, and warned about: ClusterNetworkPolicy v1beta1 (network-policy-api v0.2.1 and later)
 * refuses it, so an object stored under older CRDs keeps its verdicts and says what to write.
 */
function adminPeers(
  peers: AdminPeer[],
  field: string,
  direction: Direction,
  out: BuiltPolicy,
  masked = false,
): Peer[] {
  const result: Peer[] = [];
  peers.forEach((p, i) => {
    const f = `${field}[${i}]`;
    const set = [p.namespaces, p.pods, p.nodes, p.networks].filter((x) => x !== undefined).length;
    if (set === 0) {
      out.warnings.push(`${f}: no known peer field (namespaces, pods, nodes, networks): fails closed`);
      result.push({ kind: 'unknown' });
      return;
    }
    if (set > 1) out.errors.push(`${f}: set exactly one of namespaces, pods, nodes or networks`);
    if ((p.nodes || p.networks) && direction === 'ingress')
      out.errors.push(`${f}: nodes and networks are egress-only peers`);
    if (p.namespaces) result.push({ kind: 'pods', namespaces: { selector: p.namespaces }, pods: ANY });
    else if (p.pods)
      result.push({
        kind: 'pods',
        namespaces: { selector: p.pods.namespaceSelector ?? {} },
        pods: p.pods.podSelector,
      });
    else if (p.nodes) result.push({ kind: 'nodes', selector: p.nodes });
    else if (p.networks) {
      p.networks.forEach((n, j) => {
        const c = cidrPeer(n, [], true, `${f}.networks[${j}]`, out.errors);
        if (c?.kind === 'cidr' && masked && parseIp(n.split('/')[0]!)?.bits !== c.cidr.bits)
          out.warnings.push(
            `${f}.networks[${j}]: "${n}" has host bits set, which ClusterNetworkPolicy v1beta1 refuses (network-policy-api v0.2.1 and later); enforced as ${formatPrefix(c.cidr)}: write that`,
          );
        if (c) result.push(c);
      });
    }
  });
  return result;
}

function anpPorts(ports: AnpPort[] | undefined, field: string, errors: string[]): PortMatch[] | undefined {
  if (!ports) return undefined;
  const out: PortMatch[] = [];
  ports.forEach((p, i) => {
    const f = `${field}[${i}]`;
    const set = [p.portNumber, p.namedPort, p.portRange].filter((x) => x !== undefined).length;
    if (set !== 1) errors.push(`${f}: set exactly one of portNumber, namedPort or portRange`);
    else if (p.portNumber)
      out.push({
        kind: 'range',
        proto: protoOf(p.portNumber.protocol),
        range: { start: p.portNumber.port, end: p.portNumber.port },
      });
    else if (p.portRange) {
      if (p.portRange.end < p.portRange.start)
        errors.push(`${f}.portRange: end ${p.portRange.end} is below start ${p.portRange.start}`);
      else
        out.push({
          kind: 'range',
          proto: protoOf(p.portRange.protocol),
          range: { start: p.portRange.start, end: p.portRange.end },
        });
    } else if (p.namedPort) out.push({ kind: 'named', name: p.namedPort });
  });
  return out;
}

function cnpPorts(
  protocols: CnpProtocol[] | undefined,
  field: string,
  errors: string[],
): PortMatch[] | undefined {
  if (!protocols) return undefined;
  const out: PortMatch[] = [];
  protocols.forEach((p, i) => {
    const f = `${field}[${i}]`;
    const set = (['tcp', 'udp', 'sctp', 'destinationNamedPort'] as const).filter((k) => p[k] !== undefined);
    if (set.length !== 1) {
      errors.push(`${f}: set exactly one of tcp, udp, sctp or destinationNamedPort`);
      return;
    }
    if (p.destinationNamedPort) {
      out.push({ kind: 'named', name: p.destinationNamedPort });
      return;
    }
    const key = set[0] as 'tcp' | 'udp' | 'sctp';
    const proto = PROTO[key.toUpperCase() as keyof typeof PROTO];
    const dp = p[key]?.destinationPort;
    if (!dp) out.push({ kind: 'range', proto, range: { start: 1, end: 65535 } });
    else if ((dp.number === undefined) === (dp.range === undefined))
      errors.push(`${f}.${key}.destinationPort: set exactly one of number or range`);
    else if (dp.number !== undefined)
      out.push({ kind: 'range', proto, range: { start: dp.number, end: dp.number } });
    else if (dp.range!.end < dp.range!.start)
      errors.push(`${f}.${key}.destinationPort.range: end is below start`);
    else out.push({ kind: 'range', proto, range: { ...dp.range! } });
  });
  return out;
}

const ACTIONS: Record<string, Action> = { Allow: 'allow', Accept: 'allow', Deny: 'deny', Pass: 'pass' };
/** Among admin rules of equal priority, AdminNetworkPolicy sorts before ClusterNetworkPolicy. */
const KIND_ORDER = {
  AdminNetworkPolicy: 0,
  ClusterNetworkPolicy: 1,
  BaselineAdminNetworkPolicy: 2,
  NetworkPolicy: 0,
} as const;

interface AdminRuleInput {
  name?: string;
  action: string;
  from?: AdminPeer[];
  to?: AdminPeer[];
  ports?: AnpPort[];
  protocols?: CnpProtocol[];
}

function buildAdmin(
  o: NetPolicyObject,
  tier: Tier,
  priority: number,
  spec: { subject: AdminSubject; ingress?: unknown[]; egress?: unknown[] },
  out: BuiltPolicy,
): void {
  const ingress = spec.ingress as AdminRuleInput[] | undefined;
  const egress = spec.egress as AdminRuleInput[] | undefined;
  const subject = subjectMatch(spec.subject, 'spec.subject', out.errors);
  for (const d of ['ingress', 'egress'] as const) {
    (d === 'ingress' ? ingress : egress)?.forEach((r, i) => {
      const field = `spec.${d}[${i}]`;
      const peerField = d === 'ingress' ? 'from' : 'to';
      const peers = adminPeers(
        (r[peerField] ?? []) as AdminPeer[],
        `${field}.${peerField}`,
        d,
        out,
        o.kind === 'ClusterNetworkPolicy',
      );
      const ports =
        o.kind === 'ClusterNetworkPolicy'
          ? cnpPorts(r.protocols, `${field}.protocols`, out.errors)
          : anpPorts(r.ports, `${field}.ports`, out.errors);
      const rule: Rule = {
        id: `${out.key}#${d}[${i}]`,
        source: {
          kind: o.kind,
          name: o.name,
          direction: d,
          index: i,
          ...(r.name ? { ruleName: r.name } : {}),
        },
        tier,
        direction: d,
        action: ACTIONS[r.action]!,
        order: [priority, KIND_ORDER[o.kind], o.name, i],
        priority,
        subject,
        peers,
      };
      if (ports) rule.ports = ports;
      out.rules.push(rule);
    });
  }
}

function parse<T>(schema: z.ZodType<T>, spec: unknown, out: BuiltPolicy): T | undefined {
  const r = schema.safeParse(spec ?? {});
  if (!r.success) {
    out.errors.push(zodMessage(r.error, 'spec'));
    return undefined;
  }
  return r.data;
}

/** Validates one policy object and lowers it into rules (and NetworkPolicy isolation). */
export function buildPolicy(o: NetPolicyObject): BuiltPolicy {
  const out: BuiltPolicy = { key: policyKey(o), rules: [], errors: [], warnings: [] };
  checkSelectors(o.spec, 'spec', out.errors);
  switch (o.kind) {
    case 'NetworkPolicy': {
      const spec = parse(networkPolicySpecSchema, o.spec, out);
      if (spec) buildNetworkPolicy(o, spec, out);
      break;
    }
    case 'AdminNetworkPolicy': {
      const spec = parse(adminNetworkPolicySpecSchema, o.spec, out);
      if (spec) buildAdmin(o, 'admin', spec.priority, spec, out);
      break;
    }
    case 'BaselineAdminNetworkPolicy': {
      if (o.name !== 'default')
        out.errors.push(
          `metadata.name: a BaselineAdminNetworkPolicy must be named "default" (got "${o.name}")`,
        );
      const spec = parse(baselineAdminNetworkPolicySpecSchema, o.spec, out);
      if (spec) buildAdmin(o, 'baseline', 1001, spec, out);
      break;
    }
    case 'ClusterNetworkPolicy': {
      const spec = parse(clusterNetworkPolicySpecSchema, o.spec, out);
      if (spec) buildAdmin(o, spec.tier === 'Admin' ? 'admin' : 'baseline', spec.priority, spec, out);
      break;
    }
  }
  if (out.errors.length > 0) {
    out.rules = [];
    delete out.isolation;
    if (o.kind === 'NetworkPolicy') {
      out.isolation = failClosedIsolation(o, out.key);
      out.warnings.push(
        `fail closed: the pods it selects stay isolated (${out.isolation.directions.join(', ') || 'no direction'}) and none of its rules allows anything until it is fixed`,
      );
    }
  }
  return out;
}

/**
 * What a NetworkPolicy Cascade cannot read still does (fail closed): the pods it selects stay isolated
 * in the directions it names and none of its rules allows anything, as when a node refuses one for
 * size. It touches only its own namespace's pods, so a tenant's mistake opens nothing and closes
 * nothing for others. Read as far as it can be: an unreadable podSelector isolates every pod of the
 * namespace, unreadable policyTypes both directions; no policyTypes, the Kubernetes default (Ingress,
 * and Egress when it has egress rules).
 */
function failClosedIsolation(o: NetPolicyObject, key: string): Isolation {
  const raw = (o.spec && typeof o.spec === 'object' ? o.spec : {}) as Record<string, unknown>;
  const sel = labelSelectorSchema.safeParse(raw.podSelector);
  const subject = sel.success && validateSelector(sel.data, 'podSelector').length === 0 ? sel.data : ANY;
  const types = z.array(z.enum(['Ingress', 'Egress'])).safeParse(raw.policyTypes);
  const directions: Direction[] =
    raw.policyTypes === undefined
      ? Array.isArray(raw.egress) && raw.egress.length > 0
        ? ['ingress', 'egress']
        : ['ingress']
      : types.success
        ? [...new Set(types.data)].map((t) => t.toLowerCase() as Direction)
        : ['ingress', 'egress'];
  return { policy: key, namespace: o.namespace ?? 'default', subject, directions };
}

/** Lower first: priority, kind, name, rule index. The evaluation order inside a tier. */
export function compareRules(a: Rule, b: Rule): number {
  for (let i = 0; i < 4; i++) {
    const x = a.order[i]!;
    const y = b.order[i]!;
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}
