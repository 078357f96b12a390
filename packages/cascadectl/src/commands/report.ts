// cascadectl report FILES... -o DIR: one HTML page (DIR/index.html, self-contained) with the lint
// findings, the status of every policy and target, the effective policy of every path, the hierarchy
// picture and the connectivity grid, and a search box that filters every table (also from the URL:
// index.html#q=orders). The pictures are also written beside it (hierarchy.svg, grid.svg).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Command, err, UsageError } from '../cli.ts';
import { gridPicture } from '../graph/grid.ts';
import { gatewayPicture } from '../graph/hierarchy.ts';
import { esc } from '../graph/svg.ts';
import { hasInput } from '../load.ts';
import { version } from '../version.ts';
import { pathResults } from './effective.ts';
import { loadBothWorlds } from './gateway-common.ts';
import { lintFindings } from './lint.ts';
import { portsInUse } from './netpol.ts';
import { statusReport, withLiveConditions } from './status.ts';

interface Table {
  id: string;
  title: string;
  intro: string;
  head: string[];
  rows: { cells: string[]; tone?: 'bad' | 'warn' | 'ok' }[];
}

const SCRIPT = `
const q = document.getElementById('q');
function apply() {
  const words = q.value.toLowerCase().split(/\\s+/).filter(Boolean);
  let shown = 0, total = 0;
  for (const t of document.querySelectorAll('table[data-search]')) {
    let n = 0;
    const rows = t.tBodies[0].rows;
    for (const r of rows) {
      const text = r.textContent.toLowerCase();
      const hit = words.every((w) => text.includes(w));
      r.hidden = !hit;
      if (hit) n++;
    }
    shown += n; total += rows.length;
    t.closest('section').querySelector('.count').textContent = words.length ? n + ' of ' + rows.length + ' shown' : rows.length + '';
  }
  document.body.dataset.shown = shown + '/' + total;
  const h = words.length ? '#q=' + encodeURIComponent(q.value) : ' ';
  if (location.hash !== h.trim()) history.replaceState(null, '', h);
}
q.addEventListener('input', apply);
const m = /^#q=(.*)$/.exec(location.hash);
if (m) q.value = decodeURIComponent(m[1]);
apply();
document.body.dataset.pictures = [...document.querySelectorAll('figure svg')]
  .map((s) => { const b = s.getBoundingClientRect(); return Math.round(b.width) + 'x' + Math.round(b.height); }).join(',');
`;

const STYLE = `
body { font: 14px/1.4 "DejaVu Sans", Verdana, sans-serif; margin: 0; color: #111827; }
header { position: sticky; top: 0; background: #fff; border-bottom: 1px solid #e5e7eb; padding: 10px 20px; z-index: 1; }
header h1 { font-size: 18px; margin: 0 0 6px; }
nav a { margin-right: 14px; color: #2563eb; }
#q { width: 420px; padding: 5px 8px; font-size: 14px; }
main { padding: 0 20px 40px; }
section { margin-top: 24px; }
h2 { font-size: 16px; margin-bottom: 4px; }
.count { color: #6b7280; font-weight: normal; font-size: 13px; margin-left: 8px; }
.intro { color: #4b5563; margin: 0 0 8px; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; vertical-align: top; border-bottom: 1px solid #e5e7eb; padding: 4px 8px; }
th { background: #f9fafb; position: sticky; top: 76px; }
td code { white-space: pre-wrap; word-break: break-all; font-size: 12px; }
tr.bad td:first-child { border-left: 4px solid #dc2626; }
tr.warn td:first-child { border-left: 4px solid #f59e0b; }
tr.ok td:first-child { border-left: 4px solid #16a34a; }
figure { margin: 8px 0; overflow: auto; border: 1px solid #e5e7eb; max-height: 80vh; }
`;

function tableHtml(t: Table): string {
  return `<section id="${t.id}"><h2>${esc(t.title)}<span class="count"></span></h2><p class="intro">${esc(t.intro)}</p>
<table data-search><thead><tr>${t.head.map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead><tbody>
${t.rows.map((r) => `<tr${r.tone ? ` class="${r.tone}"` : ''}>${r.cells.map((c) => `<td>${c}</td>`).join('')}</tr>`).join('\n')}
</tbody></table></section>`;
}

/** The report's page and pictures for a set of manifests. */
export function buildReport(files: string[]): {
  html: string;
  svgs: Record<string, string>;
  problems: number;
} {
  const { gateway, netpol, loaded } = loadBothWorlds(files);
  const world = gateway.world;
  const tables: Table[] = [];
  const findings = lintFindings(world, netpol.engine);
  tables.push({
    id: 'findings',
    title: 'Lint findings',
    intro:
      'What cascadectl lint reports: invalid objects (errors), and policies that do not do what their author likely meant.',
    head: ['SEVERITY', 'KIND', 'OBJECT', 'MESSAGE'],
    rows: findings.map((f) => ({
      cells: [f.severity, f.kind, f.object, f.message].map(esc),
      tone: f.severity === 'error' ? 'bad' : 'warn',
    })),
  });
  const status = withLiveConditions(statusReport(world), loaded.manifests);
  const fromCluster = status.policies.some((p) => p.source === 'cluster');
  const cond = (c: { type: string; status: string; reason: string; message: string }) =>
    `<b>${esc(c.type)}</b> ${esc(c.status)} ${esc(c.reason)}: ${esc(c.message)}`;
  tables.push({
    id: 'status',
    title: 'Policy status',
    intro: fromCluster
      ? 'The conditions the controllers wrote on each policy and the <Kind>Affected conditions on targets, read from the cluster (where cascadectl computes otherwise from the same objects, it says so: it cannot see gateway programming, wiring, or whether Authorino and Limitador answer).'
      : 'The conditions cascadectl computes from these files for each policy (the controllers add what only a cluster shows: gateway programming, wiring, Authorino and Limitador readiness), and the <Kind>Affected conditions on targets.',
    head: ['KIND', 'OBJECT', 'CONDITIONS'],
    rows: [...status.policies, ...status.targets].map((p) => ({
      cells: [
        esc(p.kind),
        esc(`${p.namespace}/${p.name}`),
        [
          ...p.conditions.map(cond),
          ...(p.differs ?? []).map(
            (d) =>
              `<i>cascadectl computes ${esc(d.type)} ${esc(d.computed)} (the controller wrote ${esc(d.cluster)})</i>`,
          ),
        ].join('<br>'),
      ],
      tone: p.conditions.every((c) => c.status === 'True')
        ? 'ok'
        : p.conditions.some((c) => c.type === 'Accepted' && c.status === 'False')
          ? 'bad'
          : 'warn',
    })),
  });
  tables.push({
    id: 'effective',
    title: 'Effective policies',
    intro:
      'For every path (gateway, listener, route, rule): each rule that applies, its value, and the policy it comes from.',
    head: ['KIND', 'GATEWAY#LISTENER', 'ROUTE > RULE', 'RULE', 'VALUE', 'FROM', 'AS'],
    rows: pathResults(world).flatMap((r) =>
      Object.entries(r.rules).map(([key, v]) => ({
        cells: [
          esc(r.policyKind),
          esc(`${r.path.gateway}#${r.path.listener}`),
          esc(`${r.path.route} > ${r.path.rule}`),
          esc(key),
          `<code>${esc(JSON.stringify(v.value))}</code>`,
          esc(`${v.source.namespace}/${v.source.name}`),
          esc(v.as),
        ],
      })),
    ),
  });
  const svgs: Record<string, string> = {};
  const figures: string[] = [];
  if (world.engines.size && [...world.engines.values()].some((e) => [...e.results()].length)) {
    svgs['hierarchy.svg'] = gatewayPicture(world.engines.values()).svg;
    figures.push(
      `<section id="hierarchy"><h2>Hierarchy</h2><p class="intro">Each policy where it attaches, the effective result at each rule (=), refused unsets (!), overridden blocks faded; identical routes drawn once (dashed). Also in hierarchy.svg.</p><figure>${svgs['hierarchy.svg']}</figure></section>`,
    );
  }
  if (netpol.engine.pods.size) {
    svgs['grid.svg'] = gridPicture(netpol.engine, portsInUse(netpol.engine)).svg;
    figures.push(
      `<section id="grid"><h2>Connectivity</h2><p class="intro">Who can connect to whom, on the ports each destination serves. Also in grid.svg.</p><figure>${svgs['grid.svg']}</figure></section>`,
    );
  }
  const counts = `${status.policies.length} policies, ${findings.length} findings, ${tables[2]!.rows.length} effective rules, ${netpol.engine.pods.size} pods`;
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Cascade report</title>
<meta name="generator" content="cascadectl ${esc(version())}">
<style>${STYLE}</style></head>
<body><header><h1>Cascade report</h1>
<input id="q" type="search" placeholder="Search every table: route, policy, namespace, rule, reason (all words)" autofocus>
<span class="count">${esc(counts)}</span><br>
<nav>${[...tables.map((t) => [t.id, t.title]), ...(svgs['hierarchy.svg'] ? [['hierarchy', 'Hierarchy']] : []), ...(svgs['grid.svg'] ? [['grid', 'Connectivity']] : [])].map(([id, t]) => `<a href="#${id}">${esc(t!)}</a>`).join('')}</nav></header>
<main>${tables.map(tableHtml).join('\n')}
${figures.join('\n')}</main>
<script>${SCRIPT}</script></body></html>
`;
  return { html, svgs, problems: gateway.problems + netpol.problems };
}

export const reportCommand: Command = {
  name: 'report',
  summary:
    'one HTML page: lint findings, status, effective policies, the hierarchy and the grid, with search',
  usage: 'cascadectl report FILES... -o DIR   (writes DIR/index.html, DIR/hierarchy.svg, DIR/grid.svg)',
  options: { output: { type: 'string', short: 'o' } },
  run(values, files) {
    if (!hasInput(files))
      throw new UsageError('at least one file or folder (or --kubeconfig/--context) is required');
    if (values.output === undefined)
      throw new UsageError('-o DIR is required (the folder to write the page to)');
    const dir = String(values.output);
    const { html, svgs, problems } = buildReport(files);
    try {
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'index.html'), html);
      for (const [name, svg] of Object.entries(svgs)) writeFileSync(join(dir, name), svg);
    } catch (e) {
      err(`cascadectl report: cannot write to ${dir}: ${(e as Error).message}`);
      return 2;
    }
    err(
      `wrote ${join(dir, 'index.html')}${Object.keys(svgs)
        .map((n) => `, ${join(dir, n)}`)
        .join('')}`,
    );
    return problems > 0 ? 2 : 0;
  },
};
