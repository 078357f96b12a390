// cascadectl diff BEFORE... --after AFTER...: what-if. Which paths' effective rules change, and which
// probes' verdicts change, between two sets of manifests. Exit 0: no change, 1: changes, 2: bad input.
// With --kubeconfig both sides start from the cluster's objects (BEFORE may then be empty) and the
// files' objects replace the cluster's of the same name: `diff --kubeconfig K --after change.yaml`
// is what applying change.yaml would do, as `kubectl diff`.
import type { PathResult } from '@cascade/core';
import { type NetpolEngine, PROTO_NAMES } from '@cascade/netpolicy';
import { type Command, compact, oneOf, out, table, UsageError } from '../cli.ts';
import { hasInput } from '../load.ts';
import { pathResults } from './effective.ts';
import { loadBothWorlds } from './gateway-common.ts';
import {
  type Probe,
  type ProbeResult,
  portOf,
  portsInUse,
  readProbes,
  resolveAddr,
  simulateProbe,
} from './netpol.ts';

type RuleEntry = PathResult['rules'][string];

export interface RuleChange {
  key: string;
  change: 'added' | 'removed' | 'changed';
  before?: RuleEntry;
  after?: RuleEntry;
}

export interface PathChange {
  policyKind: string;
  path: PathResult['path'];
  change: 'added' | 'removed' | 'changed';
  rules: RuleChange[];
}

export interface ProbeChange {
  from: string;
  to: string;
  protocol: string;
  port: number | string;
  /** undefined: the probe cannot be run on that side (a pod that does not exist there). */
  before?: Omit<ProbeResult, 'from' | 'to' | 'protocol' | 'port'>;
  after?: Omit<ProbeResult, 'from' | 'to' | 'protocol' | 'port'>;
}

const pathKey = (r: PathResult) => {
  const p = r.path;
  return `${r.policyKind} ${p.gateway}#${p.listener} > ${p.routeKind} ${p.route} > ${p.rule}`;
};
const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

export function diffPaths(before: PathResult[], after: PathResult[]): PathChange[] {
  const a = new Map(before.map((r) => [pathKey(r), r]));
  const b = new Map(after.map((r) => [pathKey(r), r]));
  const keys = [...new Set([...a.keys(), ...b.keys()])].sort();
  const out: PathChange[] = [];
  for (const k of keys) {
    const x = a.get(k);
    const y = b.get(k);
    const ruleKeys = [...new Set([...Object.keys(x?.rules ?? {}), ...Object.keys(y?.rules ?? {})])].sort();
    const rules: RuleChange[] = [];
    for (const rk of ruleKeys) {
      const rx = x?.rules[rk];
      const ry = y?.rules[rk];
      if (rx && ry && same(rx, ry)) continue;
      rules.push({
        key: rk,
        change: !rx ? 'added' : !ry ? 'removed' : 'changed',
        ...(rx ? { before: rx } : {}),
        ...(ry ? { after: ry } : {}),
      });
    }
    const change = !x ? 'added' : !y ? 'removed' : 'changed';
    if (change === 'changed' && rules.length === 0) continue;
    const r = (y ?? x)!;
    out.push({ policyKind: r.policyKind, path: r.path, change, rules });
  }
  return out;
}

function run1(engine: NetpolEngine, p: Probe): ProbeChange['before'] {
  try {
    const {
      from: _f,
      to: _t,
      protocol: _p,
      port: _n,
      ...rest
    } = simulateProbe(
      engine,
      p.from,
      p.to,
      p.proto,
      typeof p.port === 'number' ? p.port : portOf(engine, p.port, resolveAddr(engine, p.to), p.proto),
    );
    return rest;
  } catch (e) {
    if (e instanceof UsageError) return undefined; // a pod that only exists on the other side
    throw e;
  }
}

/** Without a probes file: every pair of pods present on either side, on every port in use on either. */
function defaultProbes(a: NetpolEngine, b: NetpolEngine): Probe[] {
  const pods = [...new Set([...a.pods.keys(), ...b.pods.keys()])].sort();
  const ports = new Map<string, [number, number]>();
  for (const pp of [...portsInUse(a), ...portsInUse(b)]) ports.set(pp.join('/'), pp);
  const out: Probe[] = [];
  for (const [proto, port] of [...ports.values()].sort((x, y) => x[0] - y[0] || x[1] - y[1]))
    for (const from of pods) for (const to of pods) if (from !== to) out.push({ from, to, proto, port });
  return out;
}

export function diffProbes(
  a: NetpolEngine,
  b: NetpolEngine,
  probes?: Probe[],
): { checked: number; changes: ProbeChange[] } {
  const list = probes ?? defaultProbes(a, b);
  const changes: ProbeChange[] = [];
  for (const p of list) {
    const x = run1(a, p);
    const y = run1(b, p);
    if (x && y && x.verdict === y.verdict) continue;
    if (!x && !y) continue;
    changes.push({
      from: p.from,
      to: p.to,
      protocol: PROTO_NAMES[p.proto] ?? String(p.proto),
      port: p.port,
      ...(x ? { before: x } : {}),
      ...(y ? { after: y } : {}),
    });
  }
  return { checked: list.length, changes };
}

const srcText = (e: RuleEntry | undefined) => (e ? `${e.source.namespace}/${e.source.name} ${e.as}` : '-');

function decidedText(r: ProbeChange['before']): string {
  if (!r) return 'n/a (no such pod)';
  const by = [r.egress && ['egress', r.egress], r.ingress && ['ingress', r.ingress]]
    .filter((x): x is [string, NonNullable<ProbeResult['egress']>] => Boolean(x))
    .filter(([, d]) => d.verdict === 'deny' || r.verdict === 'allow')
    .map(
      ([dir, d]) =>
        `${dir} ${d.decidedBy.tier}${d.decidedBy.policy ? ` ${d.decidedBy.policy}` : ''}${d.decidedBy.rule ? ` ${d.decidedBy.rule}` : ''}`,
    );
  return `${r.verdict.toUpperCase()} (${by.join('; ') || 'not judged'})`;
}

export const diffCommand: Command = {
  name: 'diff',
  summary:
    "what-if: which paths' effective rules and which probes' verdicts change between two sets of manifests",
  usage:
    'cascadectl diff BEFORE... --after AFTER... [--probes PROBES.yaml] [-o table|json]   (exit 0: no change, 1: changes, 2: bad input; with --kubeconfig: BEFORE is the cluster, AFTER applied over it)',
  options: {
    after: { type: 'string', multiple: true },
    probes: { type: 'string' },
    output: { type: 'string', short: 'o' },
  },
  /** `--after a b c` takes every following argument up to the next flag. */
  rewrite(argv) {
    const out: string[] = [];
    for (let i = 0; i < argv.length; i++) {
      if (argv[i] !== '--after') {
        out.push(argv[i]!);
        continue;
      }
      let n = 0;
      while (i + 1 < argv.length && !argv[i + 1]!.startsWith('-')) {
        out.push('--after', argv[++i]!);
        n++;
      }
      if (n === 0) out.push('--after');
    }
    return out;
  },
  run(values, before) {
    const format = oneOf('output', values.output, ['table', 'json'], 'table');
    const after = (values.after as string[] | undefined) ?? [];
    if (!hasInput(before))
      throw new UsageError('at least one BEFORE file or folder is required (or --kubeconfig: the cluster)');
    if (after.length === 0) throw new UsageError('--after: at least one AFTER file or folder is required');
    const probes = values.probes !== undefined ? readProbes(String(values.probes)) : undefined;
    const a = loadBothWorlds(before);
    const b = loadBothWorlds(after);
    const paths = diffPaths(pathResults(a.gateway.world), pathResults(b.gateway.world));
    const verdicts = diffProbes(a.netpol.engine, b.netpol.engine, probes);
    const problems = a.gateway.problems + b.gateway.problems + a.netpol.problems + b.netpol.problems;
    // an error is an error: no partial diff on stdout (the problems are on stderr), exit 2
    if (problems > 0) return 2;
    if (format === 'json') out(JSON.stringify({ paths, probes: verdicts.changes }, null, 2));
    else {
      const lines: string[] = [];
      const count = (c: PathChange['change']) => paths.filter((p) => p.change === c).length;
      lines.push(
        `Effective policies: ${count('changed')} path(s) changed, ${count('added')} added, ${count('removed')} removed`,
      );
      for (const p of paths) {
        const sign = p.change === 'added' ? '+' : p.change === 'removed' ? '-' : '~';
        lines.push(`${sign} ${pathKey(p as unknown as PathResult)}`);
        const rows = p.rules.map((r) => [
          `  ${r.change === 'added' ? '+' : r.change === 'removed' ? '-' : '~'} ${r.key}`,
          r.before ? `${srcText(r.before)} ${compact(r.before.value, 40)}` : '-',
          '->',
          r.after ? `${srcText(r.after)} ${compact(r.after.value, 40)}` : '-',
        ]);
        if (rows.length) lines.push(table(rows, '  '));
      }
      lines.push(
        '',
        `Network policy: ${verdicts.changes.length} of ${verdicts.checked} probe(s) change verdict${probes ? '' : ' (every pod pair on every port in use)'}`,
      );
      if (verdicts.changes.length)
        lines.push(
          table(
            [
              ['FROM', 'TO', 'PROTO/PORT', 'BEFORE', 'AFTER'],
              ...verdicts.changes.map((c) => [
                c.from,
                c.to,
                `${c.protocol}/${c.port}`,
                decidedText(c.before),
                decidedText(c.after),
              ]),
            ],
            '  ',
          ),
        );
      out(lines.join('\n'));
    }
    return paths.length > 0 || verdicts.changes.length > 0 ? 1 : 0;
  },
};
