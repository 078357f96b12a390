// Flow logs: the kernel reports denied flows (and allowed ones for audited endpoints) with the
// deciding rule to a ring buffer; the agent drains it, names the pods and the rule, rate-limits per
// flow, logs each as a JSON line and keeps the last ones for `GET /flows` (NDJSON, `?follow=1`
// streams), which `cascadectl flows` reads like `hubble observe`.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FlowEvent } from '@cascade/bpf-datapath';
import type { Metrics } from '@cascade/core/kube';
import { MAX_STAGED_COUNTS, type NodeReportSpec, STAGED_WINDOW_SECONDS } from '../cluster/node-report.ts';
import { PROTO_NAMES } from '../engine/ports.ts';
import { stagedTargetKey } from '../engine/staged-view.ts';

export type StagedCount = NonNullable<NodeReportSpec['stagedFlows']>[number];
const MINUTE = 60_000;

export interface FlowRecord {
  time: string;
  node: string;
  direction: 'ingress' | 'egress';
  verdict: string;
  reason: string;
  /** ns/name of a pod, or the address */
  from: string;
  to: string;
  fromNamespace?: string;
  toNamespace?: string;
  protocol: string;
  port: number;
  /** The deciding rule (policy#rule), when the kernel names one. */
  rule?: string;
  /** Reports of this flow left out since its last record (one record per flow per period). */
  repeats?: number;
  /**
   * What the staged set would decide instead, judged by the datapath beside the enforced set (only
   * where the two differ; never enforced): its verdict and deciding rule (a staged object's, or an
   * enforced policy's where staging removed what decides now).
   */
  staged?: { verdict: 'allow' | 'deny'; rule?: string };
}

function stagedPart(
  s: NonNullable<FlowEvent['staged']>,
  rules: ReadonlyMap<number, string>,
): NonNullable<FlowRecord['staged']> {
  const rule = s.rule ? rules.get(s.rule) : undefined;
  return { verdict: s.verdict, ...(rule ? { rule } : {}) };
}

/**
 * Flows counted by policy, direction and verdict for a metric family: policies one by one up to
 * MAX_POLICY_SERIES, the rest as "other" (a series per policy is bounded).
 */
class PolicySeries {
  private readonly counts = new Map<string, number>();
  private readonly policies = new Set<string>();

  inc(policy: string, direction: string, verdict: string): void {
    let p = policy;
    if (!this.policies.has(p)) {
      if (this.policies.size >= MAX_POLICY_SERIES) p = 'other';
      else this.policies.add(p);
    }
    const k = `${p}|${direction}|${verdict}`;
    this.counts.set(k, (this.counts.get(k) ?? 0) + 1);
  }

  samples(): [{ policy: string; direction: string; verdict: string }, number][] {
    return [...this.counts].map(([k, n]) => {
      const [policy, direction, verdict] = k.split('|') as [string, string, string];
      return [{ policy, direction, verdict }, n];
    });
  }
}

/** 127.0.0.0/8 or ::1, as a socket reports its peer (IPv4-mapped included). */
export function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  const a = address.startsWith('::ffff:') ? address.slice(7) : address;
  return a === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(a);
}

/** Deciding policies counted one by one in cascade_datapath_policy_flows_total; the rest as "other". */
export const MAX_POLICY_SERIES = 500;

export class FlowLog {
  private readonly ring: FlowRecord[] = [];
  /** `policy|direction|verdict` -> flows the kernel reported (every event, before the per-flow limit). */
  private readonly byPolicy = new PolicySeries();
  /** Per minute: `staged object|direction|verdict|rule` -> flows (the staged objects' status counts). */
  private readonly stagedMinutes = new Map<number, Map<string, number>>();
  /** By policy, direction and staged verdict: new flows the staged set would judge otherwise. */
  private readonly byStaged = new PolicySeries();
  /** flow -> when it was last recorded, and the reports left out since */
  private readonly lastByFlow = new Map<string, { at: number; repeats: number }>();
  private readonly followers = new Set<{ res: ServerResponse; match: (r: FlowRecord) => boolean }>();
  dropped = 0;
  private readonly capacity: number;
  private readonly perFlowMs: number;

  constructor(capacity = 10_000, perFlowMs = 5_000) {
    this.capacity = capacity;
    this.perFlowMs = perFlowMs;
  }

  /**
   * Names and records kernel events; a flow reported within perFlowMs of its last report is counted,
   * not kept. `podAt` names the pod (`ns/name`) owning an address: the agent's address index, so a
   * drain costs per event, not per pod of the cluster (an agent fed by slices knows them all).
   */
  add(
    events: FlowEvent[],
    podAt: (address: string) => string | undefined,
    rules: ReadonlyMap<number, string>,
    node: string,
    now = Date.now(),
    /** The staged objects answerable for a flow the staged set judges otherwise (engine.stagedOf). */
    answerable: (e: FlowEvent) => string[] = () => [],
  ): FlowRecord[] {
    const name = (ip: string) => {
      const key = podAt(ip);
      return key ? { text: key, ns: key.slice(0, key.indexOf('/')) } : { text: ip };
    };
    const out: FlowRecord[] = [];
    for (const e of events) {
      this.countPolicy(e, rules);
      if (e.staged) {
        this.countStaged(e, rules);
        this.tallyStaged(e, rules, answerable(e), now);
      }
      // a staged verdict is part of the flow's identity: a staged change shows at once
      const key = `${e.src}|${e.dst}|${e.proto}|${e.dport}|${e.direction}|${e.verdict}|${e.staged?.verdict ?? ''}`;
      const last = this.lastByFlow.get(key);
      if (last !== undefined && now - last.at < this.perFlowMs) {
        this.dropped++;
        last.repeats++;
        continue;
      }
      if (this.lastByFlow.size > 100_000) this.lastByFlow.clear();
      this.lastByFlow.set(key, { at: now, repeats: 0 });
      const from = name(e.src);
      const to = name(e.dst);
      const r: FlowRecord = {
        time: new Date(now).toISOString(),
        node,
        direction: e.direction,
        verdict: e.verdict,
        reason: e.reason,
        from: from.text,
        to: to.text,
        ...(from.ns ? { fromNamespace: from.ns } : {}),
        ...(to.ns ? { toNamespace: to.ns } : {}),
        protocol: PROTO_NAMES[e.proto] ?? String(e.proto),
        port: e.dport,
        ...(e.rule && rules.get(e.rule) ? { rule: rules.get(e.rule)! } : {}),
        ...(last?.repeats ? { repeats: last.repeats } : {}),
        ...(e.staged ? { staged: stagedPart(e.staged, rules) } : {}),
      };
      out.push(r);
      this.ring.push(r);
      if (this.ring.length > this.capacity) this.ring.shift();
      for (const f of this.followers) if (f.match(r)) f.res.write(`${JSON.stringify(r)}\n`);
    }
    return out;
  }

  /**
   * One reported flow for its deciding policy (the rule's policy part; without a rule, the kernel's
   * reason: isolation's default deny, say). Bounded: past MAX_POLICY_SERIES policies, "other".
   */
  private countPolicy(e: FlowEvent, rules: ReadonlyMap<number, string>): void {
    const rule = e.rule ? rules.get(e.rule) : undefined;
    this.byPolicy.inc(rule ? rule.split('#')[0]! : `(${e.reason})`, e.direction, e.verdict);
  }

  /**
   * One new flow the staged set would judge otherwise, for the policy of the staged verdict's rule
   * (a staged object, `StagedNetworkPolicy/shop/x`, or the enforced policy that would decide instead),
   * bounded as countPolicy.
   */
  private countStaged(e: FlowEvent, rules: ReadonlyMap<number, string>): void {
    const rule = e.staged!.rule ? rules.get(e.staged!.rule) : undefined;
    this.byStaged.inc(rule ? rule.split('#')[0]! : '(default)', e.direction, e.staged!.verdict);
  }

  /** One staged flow, in its minute, for each staged object answerable (its own rule's first). */
  private tallyStaged(e: FlowEvent, rules: ReadonlyMap<number, string>, keys: string[], now: number): void {
    const rule = e.staged!.rule ? rules.get(e.staged!.rule) : undefined;
    const policy = rule?.split('#')[0];
    const own = policy !== undefined && stagedTargetKey(policy) !== undefined ? policy : undefined;
    const minute = Math.floor(now / MINUTE);
    let m = this.stagedMinutes.get(minute);
    if (!m) this.stagedMinutes.set(minute, (m = new Map()));
    for (const key of new Set([...(own ? [own] : []), ...keys])) {
      const k = `${key}|${e.direction}|${e.staged!.verdict}|${rule ?? ''}`;
      // bounded: a minute holds at most the report's worth of distinct counts
      if (!m.has(k) && m.size >= MAX_STAGED_COUNTS) continue;
      m.set(k, (m.get(k) ?? 0) + 1);
    }
  }

  /**
   * Staged-flow counts over the last STAGED_WINDOW_SECONDS of complete minutes (so they change at
   * most once a minute: the report is not rewritten at every flow), sorted, at most MAX_STAGED_COUNTS.
   */
  stagedWindow(now = Date.now()): StagedCount[] {
    const current = Math.floor(now / MINUTE);
    const first = current - STAGED_WINDOW_SECONDS / 60;
    const sums = new Map<string, number>();
    for (const [minute, m] of this.stagedMinutes) {
      if (minute < first) {
        this.stagedMinutes.delete(minute);
        continue;
      }
      if (minute >= current) continue;
      for (const [k, n] of m) sums.set(k, (sums.get(k) ?? 0) + n);
    }
    return [...sums]
      .sort((a, b) => (a[0] < b[0] ? -1 : 1))
      .slice(0, MAX_STAGED_COUNTS)
      .map(([k, flows]) => {
        const [staged, direction, verdict, rule] = k.split('|') as [
          string,
          'ingress' | 'egress',
          'allow' | 'deny',
          string,
        ];
        return { staged, direction, verdict, ...(rule ? { rule } : {}), flows };
      });
  }

  /** cascade_datapath_staged_flows_total's samples: flows the staged set would decide otherwise. */
  stagedSamples(): [{ policy: string; direction: string; verdict: string }, number][] {
    return this.byStaged.samples();
  }

  /** cascade_datapath_policy_flows_total's samples. */
  policySamples(): [{ policy: string; direction: string; verdict: string }, number][] {
    return this.byPolicy.samples();
  }

  /** `GET /flows[?verdict=deny][&namespace=NS][&follow=1]`: NDJSON. Returns false for other paths. */
  handle(req: IncomingMessage, res: ServerResponse): boolean {
    const url = new URL(req.url ?? '/', 'http://agent');
    if (url.pathname !== '/flows') return false;
    // The flows name every tenant's pods: served to this node's loopback only, whatever address the
    // metrics listen on (a pod of the node reaches the node's address, never its loopback). From
    // elsewhere they are read through pods/exec (flows-read.ts).
    if (
      refusedOffLoopback(
        req,
        res,
        'flows are served on loopback only: cascadectl flows --node NODE reads them through pods/exec',
      )
    )
      return true;
    const verdict = url.searchParams.get('verdict');
    const ns = url.searchParams.get('namespace');
    const match = (r: FlowRecord) =>
      (!verdict || r.verdict === verdict) && (!ns || r.fromNamespace === ns || r.toNamespace === ns);
    res.writeHead(200, { 'content-type': 'application/x-ndjson' });
    for (const r of this.ring) if (match(r)) res.write(`${JSON.stringify(r)}\n`);
    if (url.searchParams.get('follow') !== '1') {
      res.end();
      return true;
    }
    const f = { res, match };
    this.followers.add(f);
    req.on('close', () => this.followers.delete(f));
    return true;
  }
}

/**
 * `GET /rules?id=N[&id=M...]`: the names of rule numbers (as map values and flow events carry them),
 * JSON `{N: "policy#rule"}`, at most 64; loopback only, as the flows (they name every tenant's
 * policies). The agent image's trace reads them. Returns false for other paths.
 */
/**
 * `GET /metrics` for a loopback peer: the node's metrics and the series that name tenants' policies
 * (`tenant`), which other peers never get (they fall through to the node's metrics alone). Returns
 * false for other paths and other peers.
 */
export function serveTenantMetrics(
  req: IncomingMessage,
  res: ServerResponse,
  node: Metrics,
  tenant: Metrics,
): boolean {
  if ((req.url ?? '').split('?')[0] !== '/metrics' || !isLoopback(req.socket.remoteAddress)) return false;
  Promise.all([node.render(), tenant.render()]).then(
    ([a, b]) => {
      res.writeHead(200, { 'content-type': node.registry.contentType });
      res.end(a + b);
    },
    (e: unknown) => {
      res.writeHead(500);
      res.end(String(e));
    },
  );
  return true;
}

export function serveRules(
  req: IncomingMessage,
  res: ServerResponse,
  rules: ReadonlyMap<number, string>,
): boolean {
  const url = new URL(req.url ?? '/', 'http://agent');
  if (url.pathname !== '/rules') return false;
  if (refusedOffLoopback(req, res, 'rules are served on loopback only')) return true;
  const out: Record<string, string> = {};
  for (const id of url.searchParams.getAll('id').slice(0, 64)) {
    const name = rules.get(Number(id));
    if (name) out[id] = name;
  }
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(out));
  return true;
}

/** Answers 403 with `why` to a peer that is not this node's loopback (true: refused). */
function refusedOffLoopback(req: IncomingMessage, res: ServerResponse, why: string): boolean {
  if (isLoopback(req.socket.remoteAddress)) return false;
  res.writeHead(403, { 'content-type': 'text/plain' });
  res.end(`${why}\n`);
  return true;
}
