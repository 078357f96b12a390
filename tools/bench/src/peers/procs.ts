// The enforcers' processes, read from /proc on the host (every node's pods are this host's
// processes): CPU time and resident memory of Cascade's agents and controller, or of
// kube-network-policies' DaemonSet pods, and the host's busy CPU time.
import { readdirSync, readFileSync } from 'node:fs';

export interface Proc {
  pid: number;
  role: string;
  /** user + system CPU, seconds, its own and that of the children it waited for (the commands it ran) */
  cpu: number;
  rssMiB: number;
}

const TICKS = 100; // USER_HZ on Linux

/** What a command line is, for the figures; undefined for every other process. */
export function roleOf(argv: string[]): string | undefined {
  const line = argv.join(' ');
  // the agent's helper that holds its BPF maps is the agent's cost too
  if (line.includes('packages/netpolicy/src/agent/main.ts') || argv[0]?.endsWith('/cascade-bpfctl'))
    return 'cascade agent';
  if (line.includes('packages/netpolicy/src/controller/main.ts')) return 'cascade netpolicy-controller';
  if (argv[0] === '/bin/netpol' || argv[0]?.endsWith('/netpol')) return 'kube-network-policies';
  return undefined;
}

function read(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined; // gone meanwhile
  }
}

/** The host's processes with their command lines (every node's pods are among them). */
export function* processes(): Generator<{ pid: number; argv: string[] }> {
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const argv = (read(`/proc/${d}/cmdline`) ?? '').split('\0').filter(Boolean);
    if (argv.length) yield { pid: Number(d), argv };
  }
}

export function enforcerProcs(): Proc[] {
  const out: Proc[] = [];
  for (const { pid, argv } of processes()) {
    const role = roleOf(argv);
    if (!role) continue;
    const stat = read(`/proc/${pid}/stat`);
    const status = read(`/proc/${pid}/status`);
    if (!stat || !status) continue;
    // fields after the command's closing parenthesis: utime, stime, cutime, cstime are the 14th-17th
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const cpu = (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / TICKS;
    const rss = Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? 0) / 1024;
    out.push({ pid, role, cpu, rssMiB: rss });
  }
  return out;
}

/** CPU seconds each role used between two snapshots (processes that appeared count from zero). */
export function cpuBetween(before: Proc[], after: Proc[]): Map<string, number> {
  const was = new Map(before.map((p) => [p.pid, p.cpu]));
  const out = new Map<string, number>();
  for (const p of after) out.set(p.role, (out.get(p.role) ?? 0) + p.cpu - (was.get(p.pid) ?? 0));
  return out;
}

/** The host's busy CPU seconds so far (all CPUs: user, nice, system, irq, softirq, steal). */
export function hostBusy(): number {
  const [, ...v] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/);
  const n = v.map(Number);
  return (n[0]! + n[1]! + n[2]! + n[5]! + n[6]! + n[7]!) / TICKS;
}
