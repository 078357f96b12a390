// `cascadectl netpol simulate --staged`: the enforced set and the staged set (every Staged* object's
// action applied: @cascade/netpolicy engine/staged.ts) judged side by side from the same files. The
// truth table shows where the staged set would change a verdict (+ would allow, - would deny) and
// lists each change with the rules that decide it once staged; probes get the staged verdict beside
// the enforced one. Nothing here enforces: it is the offline view of what a staged policy would do.
import { mapConnection, type NetpolEngine, PROTO_NAMES, type StagedPolicy } from '@cascade/netpolicy';
import { err, table, UsageError } from '../cli.ts';
import { hasInput, loadManifests } from '../load.ts';
import { buildNetpolWorld, type NetpolWorld } from '../netpol-world.ts';
import { portsInUse, simulateProbe } from './netpol.ts';
import type { ProbeResult } from './probe-memo.ts';

export interface StagedPair {
  enforced: NetpolWorld;
  staged: NetpolWorld;
  problems: number;
}

/**
 * Both worlds of the same files; each problem printed once (the staged world's own ones marked).
 * `only`: the staged objects to apply (all by default).
 */
export function loadStagedPair(files: string[], only?: (s: StagedPolicy) => boolean): StagedPair {
  if (!hasInput(files)) throw new UsageError('at least one file or folder is required');
  const loaded = loadManifests(files);
  const enforced = buildNetpolWorld(loaded.manifests);
  const staged = buildNetpolWorld(loaded.manifests, { staged: only ?? true });
  const seen = new Set(enforced.problems);
  const all = [...loaded.problems, ...enforced.problems, ...staged.problems.filter((p) => !seen.has(p))];
  for (const p of all) err(p.includes('warning:') ? `warning: ${p.replace('warning: ', '')}` : `error: ${p}`);
  if (enforced.staged.length === 0)
    err('warning: no Staged* policy in these files: the staged set is the enforced one');
  return { enforced, staged, problems: all.filter((p) => !p.includes('warning:')).length };
}

export interface StagedChange {
  from: string;
  to: string;
  protocol: string;
  port: number;
  enforced: 'allow' | 'deny';
  staged: 'allow' | 'deny';
  /** The staged set's decisions (which rules would decide) */
  egress?: ProbeResult['egress'];
  ingress?: ProbeResult['ingress'];
}

/** Per port in use (in either set): the staged truth table, changed cells marked, and the changes. */
export function stagedTruthTables(
  pair: StagedPair,
  shown: (pod: { namespace: string; labels: Readonly<Record<string, string>> }) => boolean,
): { port: string; rows: string[][]; changes: StagedChange[] }[] {
  const e = pair.enforced.engine;
  const s = pair.staged.engine;
  const pods = [...s.pods.values()]
    .filter((p) => shown(p))
    .sort((a, b) => (`${a.namespace}/${a.name}` < `${b.namespace}/${b.name}` ? -1 : 1));
  const names = pods.map((p) => `${p.namespace}/${p.name}`);
  const ports = new Map<string, [number, number]>();
  for (const pp of [...portsInUse(e), ...portsInUse(s)]) ports.set(pp.join('/'), pp);
  const verdict = (engine: NetpolEngine, from: string, to: string, proto: number, port: number) =>
    mapConnection(engine, from, to, proto, port).verdict === 'allow' ? 'allow' : 'deny';
  return [...ports.values()]
    .sort((a, b) => a[0] - b[0] || a[1] - b[1])
    .map(([proto, port]) => {
      const changes: StagedChange[] = [];
      const rows = [
        ['from \\ to', ...names],
        ...pods.map((f, i) => [
          names[i]!,
          ...pods.map((t, j) => {
            const was = verdict(e, f.ips[0]!, t.ips[0]!, proto, port);
            const now = verdict(s, f.ips[0]!, t.ips[0]!, proto, port);
            if (was === now) return now === 'allow' ? '.' : 'X';
            const why = simulateProbe(s, names[i]!, names[j]!, proto, port);
            changes.push({
              from: names[i]!,
              to: names[j]!,
              protocol: PROTO_NAMES[proto] ?? String(proto),
              port,
              enforced: was,
              staged: now,
              ...(why.egress ? { egress: why.egress } : {}),
              ...(why.ingress ? { ingress: why.ingress } : {}),
            });
            return now === 'allow' ? '+' : '-';
          }),
        ]),
      ];
      return { port: `${PROTO_NAMES[proto] ?? proto}/${port}`, rows, changes };
    });
}

/** A decision as one phrase: `ingress: networkpolicy StagedNetworkPolicy shop/deny-db isolation`. */
export function describeStagedSide(pair: StagedPair, c: StagedChange): string {
  // the side that decides the staged verdict: a deny by either, an allow by both (ingress shown)
  const side =
    c.staged === 'deny'
      ? c.egress?.verdict === 'deny'
        ? 'egress'
        : 'ingress'
      : c.ingress
        ? 'ingress'
        : 'egress';
  const d = side === 'egress' ? c.egress : c.ingress;
  if (!d) return side;
  const by = d.decidedBy;
  // a policy the staged set took from a Staged* object is named as that object
  const label = (k: string) => {
    const [kind, rest] = [k.slice(0, k.indexOf('/')), k.slice(k.indexOf('/') + 1)];
    return pair.staged.stagedBy.has(k) ? `Staged${kind} ${rest}` : `${kind} ${rest}`;
  };
  const policy = by.policy ? by.policy.split(',').map(label).join(', ') : '';
  return `${side}: ${by.tier}${policy ? ` ${policy}` : ''}${by.rule ? ` ${by.rule}` : ''}`;
}

/** The changes as an indented table, under `heading` (e.g. "3 verdict(s) it would change:"). */
export function changesTable(pair: StagedPair, changes: StagedChange[], heading: string): string {
  return `${heading}\n${table(
    changes.map((c) => [
      `${c.from} -> ${c.to}`,
      `${c.protocol}/${c.port}`,
      `${c.enforced} -> ${c.staged.toUpperCase()}`,
      describeStagedSide(pair, c),
    ]),
    '  ',
  )}`;
}
