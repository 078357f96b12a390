// Drift between what the model says a node's datapath should hold and what its kernel holds (read by
// the agent image's debug command): endpoints (by address, with their enforcement flags), host
// addresses, Service frontends and backends. Identities and table numbers are the agent's own
// allocation, so they are not compared one to one; what they select is, by the other netpol commands.
import { addr16, type DesiredState, EP_FLAGS, formatAddr16 } from '@cascade/bpf-datapath';

/** What `debug.ts state` prints. */
export interface LiveState {
  endpoints: { address: string; identity: number; flags: number; ifindex: number }[];
  hosts: { address: string; identity: number }[];
  services: { frontend: string; proto: number; backends: string[] }[];
  policyEntries: number;
}

const norm = (ip: string) => formatAddr16(addr16(ip));

/**
 * The address of a host prefix (`10.0.0.1`, `10.0.0.1/32`, `fd00::1/128`: what the kernel keeps in its
 * exact host table), undefined for a shorter prefix (the CIDR trie). The model writes host prefixes
 * with their length; comparing only those without one left the model's side empty, and every
 * address the kernel held was reported stale (15 lines on the real node, found in issue 28's e2e).
 */
export function hostAddress(prefix: string): string | undefined {
  const [a, len] = prefix.split('/');
  if (len === undefined) return a;
  return len === (a!.includes(':') ? '128' : '32') ? a : undefined;
}
/** Host addresses the model gives the kernel's exact host table (what `maps --node` counts beside the kernel's). */
export const modelHostCount = (model: Pick<DesiredState, 'ipcache'>): number =>
  new Set(
    model.ipcache.flatMap((i) => {
      const a = hostAddress(i.prefix);
      return a === undefined ? [] : [norm(a)];
    }),
  ).size;
const hostPort = (addr: string, port: number) => `${addr.includes(':') ? `[${addr}]` : addr}:${port}`;
const flagsText = (f: number) =>
  [
    f & EP_FLAGS.ENFORCE_INGRESS ? 'ingress' : '',
    f & EP_FLAGS.ENFORCE_EGRESS ? 'egress' : '',
    f & EP_FLAGS.FAIL_CLOSED ? 'FAIL-CLOSED' : '',
    f & EP_FLAGS.AUDIT_ALLOW ? 'audit' : '',
    f & EP_FLAGS.STAGED ? 'staged' : '',
  ]
    .filter(Boolean)
    .join('+') || 'none';

/**
 * Flags that say nothing of what is enforced: audit (the agent's --audit-namespaces) and staged (the
 * staged tables the agent loads within its node's staged budget; never enforced).
 */
const NOT_COMPARED = EP_FLAGS.AUDIT_ALLOW | EP_FLAGS.STAGED;

/** Lines saying how the kernel differs from the model (empty: no drift), at most `max` per kind. */
export function mapsDrift(model: DesiredState, live: LiveState, max = 20): string[] {
  const out: string[] = [];
  const capped = (lines: string[], what: string) => {
    out.push(...lines.slice(0, max));
    if (lines.length > max) out.push(`... and ${lines.length - max} more ${what}`);
  };
  const want = new Map(model.endpoints.map((e) => [norm(e.ip), e]));
  const have = new Map(live.endpoints.map((e) => [norm(e.address), e]));
  const ep: string[] = [];
  for (const [a, e] of want) {
    const h = have.get(a);
    if (!h)
      ep.push(`endpoint ${a}: the model has it, the kernel does not (no interface found yet, or not synced)`);
    else if ((h.flags & ~NOT_COMPARED) !== (e.flags & ~NOT_COMPARED))
      ep.push(
        `endpoint ${a}: enforces ${flagsText(h.flags)} in the kernel, ${flagsText(e.flags)} in the model`,
      );
  }
  for (const a of have.keys())
    if (!want.has(a)) ep.push(`endpoint ${a}: in the kernel, not in the model (stale)`);
  capped(ep, 'endpoints');
  const wantHosts = new Set(
    model.ipcache.flatMap((i) => {
      const a = hostAddress(i.prefix);
      return a === undefined ? [] : [norm(a)];
    }),
  );
  const haveHosts = new Set(live.hosts.map((h) => norm(h.address)));
  capped(
    [...wantHosts]
      .filter((a) => !haveHosts.has(a))
      .map((a) => `host ${a}: the model knows it, the kernel does not`),
    'host addresses',
  );
  capped(
    [...haveHosts]
      .filter((a) => !wantHosts.has(a))
      .map((a) => `host ${a}: in the kernel, not in the model (stale)`),
    'host addresses',
  );
  if (model.services) {
    const wantSvc = new Map(
      model.services.map((s) => [
        `${hostPort(norm(s.addr), s.port)}/${s.proto}`,
        s.backends.map((b) => hostPort(norm(b.addr), b.port)).sort(),
      ]),
    );
    const haveSvc = new Map(live.services.map((s) => [`${s.frontend}/${s.proto}`, [...s.backends].sort()]));
    const svc: string[] = [];
    for (const [f, b] of wantSvc) {
      const h = haveSvc.get(f);
      if (!h)
        svc.push(
          `Service ${f}: the model has it, the kernel does not (refused over a budget, or not synced)`,
        );
      else if (h.join(',') !== b.join(','))
        svc.push(
          `Service ${f}: backends ${h.join(',') || 'none'} in the kernel, ${b.join(',') || 'none'} in the model`,
        );
    }
    for (const f of haveSvc.keys())
      if (!wantSvc.has(f)) svc.push(`Service ${f}: in the kernel, not in the model (stale)`);
    capped(svc, 'Services');
  }
  return out;
}
