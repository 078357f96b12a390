// A trace, as Antrea's Traceflow gives one and without sending anything: a synthetic first packet
// run through the node's real BPF program on its live maps (BPF_PROG_TEST_RUN), at the source pod's
// interface (egress) and at the destination pod's (ingress) where they are pods of this node. The
// kernel gives the verdict; the reference datapath over the same map contents names the entry that
// decides it, and the agent (on its loopback) names the rule. The conntrack entries the packet made
// are removed; it is counted as any packet, and a denial is reported in the flows as any.
import {
  addr16,
  buildPacket,
  formatAddr16,
  type LiveMaps,
  type RefDecision,
  TCP_FLAGS,
} from '@cascade/bpf-datapath';
import { agentFlowsAddress } from './flows-read.ts';

export interface TraceArgs {
  src: string;
  dst: string;
  proto: 6 | 17;
  port: number;
}

const IP = /^[0-9a-fA-F.:]{2,45}$/;

export function traceArgs(argv: readonly string[]): TraceArgs | { error: string } {
  const [src, dst, proto, port] = argv;
  if (!src || !dst || !proto || !port) return { error: 'give SRC DST tcp|udp PORT' };
  for (const a of [src, dst])
    try {
      if (!IP.test(a)) throw new Error();
      addr16(a);
    } catch {
      return { error: `"${a.slice(0, 50)}" is not an IP address` };
    }
  if (proto !== 'tcp' && proto !== 'udp') return { error: `"${proto.slice(0, 10)}" is not tcp or udp` };
  const p = Number(port);
  if (!Number.isInteger(p) || p < 1 || p > 65535)
    return { error: `"${port.slice(0, 10)}" is not a port from 1 to 65535` };
  return { src, dst, proto: proto === 'tcp' ? 6 : 17, port: p };
}

export interface TraceHop {
  at: string;
  direction: 'egress' | 'ingress';
  ifindex: number;
  /** What the kernel did with the packet (TC_ACT_OK: allow, TC_ACT_SHOT: deny). */
  kernel: 'allow' | 'deny';
  /** The reference datapath's verdict over the same maps (they differ only on a datapath bug). */
  reference: 'allow' | 'deny';
  /** Why, from the same map contents: the deciding layer and entry, and its rule. */
  decided: RefDecision['reason'];
  entry?: string;
  rule?: string;
  /** The peer's identity in this node's maps (the agent's own numbering). */
  remoteIdentity?: number;
}

/** The agent's names of rule numbers, from its loopback (undefined: no agent answering). */
async function ruleNames(ids: number[], env: NodeJS.ProcessEnv): Promise<Record<string, string> | undefined> {
  if (!ids.length) return {};
  try {
    const res = await fetch(`http://${agentFlowsAddress(env)}/rules?${ids.map((i) => `id=${i}`).join('&')}`, {
      signal: AbortSignal.timeout(2000),
    });
    return res.ok ? ((await res.json()) as Record<string, string>) : undefined;
  } catch {
    return undefined;
  }
}

export async function trace(live: LiveMaps, t: TraceArgs, env: NodeJS.ProcessEnv = process.env) {
  const norm = (ip: string) => formatAddr16(addr16(ip));
  const src = norm(t.src);
  const dst = norm(t.dst);
  const endpoints = new Map((await live.endpoints()).map((e) => [e.address, e]));
  const from = endpoints.get(src);
  const to = endpoints.get(dst);
  if (!from && !to)
    throw new Error(
      `neither ${src} nor ${dst} is an endpoint of this node: trace on the node of one of them`,
    );
  const front = `${dst.includes(':') ? `[${dst}]` : dst}:${t.port}`;
  if ((await live.services()).some((s) => s.frontend === front && s.proto === t.proto))
    throw new Error(
      `${front} is a Service frontend: trace one of its backends (a translated flow leaves NAT state)`,
    );
  // a source port no flow of either side uses now, so that removing the trace's entries removes no other
  const keys = (sport: number) => ({
    out: { local: src, remote: dst, lport: sport, rport: t.port, proto: t.proto },
    in: { local: dst, remote: src, lport: t.port, rport: sport, proto: t.proto },
  });
  let sport = 0;
  for (
    let p = 65000 + (process.pid % 500), n = 0;
    n < 500 && !sport;
    n++, p = 65000 + ((p - 65000 + 1) % 500)
  )
    if (!(await live.tracked(keys(p).out)) && !(await live.tracked(keys(p).in))) sport = p;
  if (!sport)
    throw new Error('every source port from 65000 to 65499 is in use between these two: try again later');
  const packet = buildPacket({
    src,
    dst,
    proto: t.proto,
    sport,
    dport: t.port,
    ...(t.proto === 6 ? { tcpFlags: TCP_FLAGS.SYN } : {}),
  });
  const ref = await live.reference();
  const hops: TraceHop[] = [];
  const hop = async (direction: 'egress' | 'ingress', ep: { address: string; ifindex: number }) => {
    const r = await live.run(direction === 'egress' ? 'from_endpoint' : 'to_endpoint', packet, 1, ep.ifindex);
    const d =
      direction === 'egress'
        ? ref.judge('egress', src, dst, t.proto, t.port)
        : ref.judge('ingress', dst, src, t.proto, t.port);
    const e = d.entry;
    hops.push({
      at: `${direction === 'egress' ? 'leaving' : 'reaching'} ${ep.address}`,
      direction,
      ifindex: ep.ifindex,
      kernel: r.retval === 0 ? 'allow' : 'deny',
      reference: d.verdict,
      decided: d.reason,
      ...(d.remoteIdentity !== undefined ? { remoteIdentity: d.remoteIdentity } : {}),
      ...(e
        ? {
            entry: `table ${e.table}, identity ${e.identity}, ${e.proto ? `proto ${e.proto} port ${e.port}/${e.plen}` : 'any proto'}: ${e.verdict}, precedence 0x${e.precedence.toString(16)}`,
            rule: `#${e.rule}`,
          }
        : {}),
    });
  };
  try {
    if (from) await hop('egress', from);
    if (to && (!from || hops[0]?.kernel === 'allow')) await hop('ingress', to);
  } finally {
    await live.forgetFlow(keys(sport).out);
    await live.forgetFlow(keys(sport).in);
  }
  const ids = [...new Set(hops.flatMap((h) => (h.rule ? [Number(h.rule.slice(1))] : [])))];
  const names = await ruleNames(ids, env);
  for (const h of hops)
    if (h.rule && names?.[h.rule.slice(1)]) h.rule = `${names[h.rule.slice(1)]} (${h.rule})`;
  return {
    packet: `${t.proto === 6 ? 'TCP' : 'UDP'} ${src}:${sport} -> ${dst}:${t.port}`,
    verdict: hops.every((h) => h.kernel === 'allow') ? 'allow' : 'deny',
    hops,
    ...(from && to
      ? {}
      : { note: `${from ? dst : src} is not a pod of this node: its side is judged on its own node` }),
    ...(names === undefined && ids.length
      ? { rules: 'the agent did not answer on its loopback: rule numbers only' }
      : {}),
  };
}
