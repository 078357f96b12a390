// The output of `cascadectl netpol simulate --staged` (the comparison is netpol-staged.ts's).
import { out, table } from '../cli.ts';
import { labelTest, namespaceOf } from '../selector.ts';
import { simulateProbes } from './netpol.ts';
import { changesTable, describeStagedSide, loadStagedPair, stagedTruthTables } from './netpol-staged.ts';
import { ProbeMemo, type ProbeResult } from './probe-memo.ts';
import { forEachProbe } from './probes-file.ts';

export function simulateStaged(
  values: Record<string, string | boolean | string[] | undefined>,
  files: string[],
  format: 'table' | 'json',
): number {
  const pair = loadStagedPair(files);
  const code = pair.problems > 0 ? 2 : 0;
  if (values.probes !== undefined) {
    const memos = [new ProbeMemo(), new ProbeMemo()];
    const rows: string[][] = [];
    const items: (ProbeResult & { staged: Pick<ProbeResult, 'verdict' | 'egress' | 'ingress'> })[] = [];
    forEachProbe(String(values.probes), (p) => {
      const [now, then] = [pair.enforced, pair.staged].map((w, i) =>
        simulateProbes(w.engine, w.services, p.from, p.to, p.proto, p.port, memos[i], w.reported),
      );
      now!.forEach((r, i) => {
        const s = then![i] ?? r;
        const staged = {
          verdict: s.verdict,
          ...(s.egress ? { egress: s.egress } : {}),
          ...(s.ingress ? { ingress: s.ingress } : {}),
        };
        if (format === 'json') items.push({ ...r, staged });
        else
          rows.push([
            r.from,
            r.to,
            `${r.protocol}/${r.port}`,
            r.verdict.toUpperCase(),
            s.verdict === r.verdict
              ? '='
              : `${s.verdict.toUpperCase()} (${describeStagedSide(pair, { ...s, enforced: r.verdict, staged: s.verdict })})`,
          ]);
      });
    });
    if (format === 'json') out(JSON.stringify(items, null, 2));
    else out(table([['FROM', 'TO', 'PROTO/PORT', 'VERDICT', 'STAGED'], ...rows]));
    return code;
  }
  const labelled = labelTest(values.selector as string | undefined);
  const ns = namespaceOf(values as { namespace?: string; 'all-namespaces'?: boolean });
  const tables = stagedTruthTables(
    pair,
    (p) => (ns === undefined || p.namespace === ns) && labelled(p.labels),
  );
  if (format === 'json') {
    out(JSON.stringify(tables, null, 2));
    return code;
  }
  const changes = tables.flatMap((t) => t.changes);
  out(
    [
      ...tables.map(
        (t) =>
          `${t.port}   (staged: . allow, X deny, + would allow, - would deny; rows: from, columns: to)\n${table(t.rows, '  ')}`,
      ),
      changes.length
        ? changesTable(pair, changes, `${changes.length} verdict(s) the staged policies would change:`)
        : 'the staged policies change no verdict here',
    ].join('\n\n'),
  );
  return code;
}
