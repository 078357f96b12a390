// The Gateway API hierarchy as an SVG: GatewayClass > Gateway > Listener > Route > Rule, every policy
// drawn where it attaches (defaults, overrides, constraints, bare rules and unsets in their own
// styles; a block that wins nothing below faded), and at each route rule the effective result: which
// rule wins, with what value, from which policy, and the unsets that were refused. Sibling routes
// whose drawing is identical collapse into one box, and filters keep a large cluster readable. A
// plain function of the engines; the layout comes back with the SVG for the pixel tests.
import { objectKeysOfPath, type PathResult, type PolicyEngine, toPathResult } from '@cascade/core';
import {
  type Box,
  EFFECTIVE_BADGE,
  esc,
  FONT,
  LINE,
  type MarkLayout,
  OVERRIDDEN,
  PILL_COLORS,
  type Picture,
  type PillLayout,
  type PillStyle,
  REFUSED_BADGE,
  textLines,
  wrap,
  wrapText,
} from './svg.ts';

export interface HierarchyOptions {
  title?: string;
  /** Only the paths this accepts are drawn (namespace, gateway, route, label filters). */
  include?: (path: PathResult['path']) => boolean;
  /** Draw identical sibling routes once (default true). */
  collapse?: boolean;
}

interface PillSpec {
  policy: string;
  style: PillStyle;
  text: string;
  state: PillLayout['state'];
}
interface MarkSpec {
  kind: MarkLayout['kind'];
  text: string;
  title: string;
}
interface TreeNode {
  key: string;
  level: number;
  label: string;
  children: Map<string, TreeNode>;
  pills: PillSpec[];
  marks: MarkSpec[];
  /** A collapsed route: every route (ns/name) it stands for. */
  members?: string[];
  box?: Box;
  block?: number;
}

const LEVEL_NAMES = ['GatewayClass', 'Gateway', 'Listener', 'Route', 'Rule'];
const COL = 330;
const NODE_W = 310;
const PILL_H = 18;
const GAP = 10;
const MARGIN = 20;
const TEXT_W = NODE_W - 12 - 26;

function labelOf(level: number, key: string): string {
  const [, rest = key] = /^[A-Za-z]+:(.*)$/.exec(key) ?? [];
  if (level === 2 || level === 4) return `${level === 2 ? 'listener' : 'rule'} ${rest.split('#')[1]}`;
  return `${key.slice(0, key.indexOf(':'))} ${rest}`;
}

/** AuthPolicy -> AP, RateLimitPolicy -> RLP: the capitals of the kind. */
export function abbreviate(kind: string): string {
  return kind.replace(/[^A-Z]/g, '') || kind;
}

const isConstraint = (rules: { name: string }[]) => rules.length > 0 && rules.every((r) => r.name === '*');
const short = (v: unknown, n = 48) => {
  const s = JSON.stringify(v) ?? 'undefined';
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
};
const nsName = (r: { namespace?: string; name: string }) => `${r.namespace}/${r.name}`;

export function gatewayPicture(engines: Iterable<PolicyEngine>, opts: HierarchyOptions = {}): Picture {
  const title = opts.title ?? 'Gateway API policies';
  const list = [...engines];
  const root: TreeNode = { key: '', level: -1, label: '', children: new Map(), pills: [], marks: [] };
  const nodes = new Map<string, TreeNode>();
  /** Every object on some path, drawn or filtered out: a target outside it is "not attached". */
  const onSomePath = new Set<string>();
  /** `kind:ns/name|as|objectKey`: a block of that policy wins a rule on a path through the object. */
  const wins = new Set<string>();
  const drawnPaths = new Set<string>();
  let filtered = 0;
  for (const engine of list) {
    const abbr = abbreviate(engine.kind.kind);
    for (const [path, r] of engine.results()) {
      const keys = objectKeysOfPath(path);
      for (const k of keys) onSomePath.add(k);
      const pr = toPathResult(engine.kind.kind, path, r, engine.kind);
      if (opts.include && !opts.include(pr.path)) {
        filtered++;
        continue;
      }
      for (const rule of Object.values(pr.rules))
        for (const k of keys) wins.add(`${engine.kind.kind}:${nsName(rule.source)}|${rule.as}|${k}`);
      let parent = root;
      keys.forEach((k, level) => {
        let n = parent.children.get(k);
        if (!n) {
          n = { key: k, level, label: labelOf(level, k), children: new Map(), pills: [], marks: [] };
          parent.children.set(k, n);
          nodes.set(k, n);
        }
        parent = n;
      });
      drawnPaths.add(keys.join('|'));
      // the rule's effective result, one line per rule, and the unsets that were refused
      for (const [key, rule] of Object.entries(pr.rules).sort(([a], [b]) => (a < b ? -1 : 1)))
        parent.marks.push({
          kind: 'effective',
          text: `${abbr} ${key} = ${short(rule.value)} from ${nsName(rule.source)} (${rule.as})`,
          title: `${engine.kind.kind} ${key} = ${JSON.stringify(rule.value)}\nfrom ${nsName(rule.source)} as ${rule.as}`,
        });
      for (const u of r.refusedUnsets)
        parent.marks.push({
          kind: 'refused',
          text: `${abbr} unset of ${u.key} by ${nsName(u.by)} refused: an override of ${nsName(u.override)}`,
          title: `refused unset: ${u.key}`,
        });
    }
  }
  // Policies, drawn at each object they target.
  const unattached: Picture['unattached'] = [];
  const abbreviations: string[] = [];
  for (const engine of list) {
    const abbr = abbreviate(engine.kind.kind);
    abbreviations.push(`${abbr} = ${engine.kind.kind}`);
    for (const id of [...engine.policyIds()].sort()) {
      const st = engine.policy(id)!;
      const name = `${st.object.metadata.namespace}/${st.object.metadata.name}`;
      const policy = `${engine.kind.kind} ${name}`;
      if (!st.policy) {
        unattached.push({ policy, why: `Invalid: ${st.errors[0] ?? 'rejected'}` });
        continue;
      }
      const blocks = st.policy.blocks.map((b) => {
        const style: PillStyle =
          b.as === 'override' ? (isConstraint(b.rules) ? 'constraint' : 'override') : b.as;
        const what = b.rules.map((r) => r.key).join(', ');
        return { as: b.as, style, text: `${abbr} ${name}${what ? `: ${what}` : ''}` };
      });
      for (const t of st.policy.targets) {
        const n = nodes.get(t.key);
        if (!n) {
          if (!onSomePath.has(t.key))
            unattached.push({ policy, why: `target ${t.key} is not found or has no attached route` });
          continue;
        }
        for (const b of blocks) {
          const live = b.style === 'constraint' || wins.has(`${engine.kind.kind}:${name}|${b.as}|${t.key}`);
          n.pills.push({
            policy,
            style: b.style,
            text: live ? b.text : `${b.text} (overridden: wins nothing below)`,
            state: live ? 'live' : 'overridden',
          });
        }
        if (st.policy.unset.length)
          n.pills.push({
            policy,
            style: 'unset',
            text: `${abbr} ${name}: unset ${st.policy.unset.join(', ')}`,
            state: 'live',
          });
      }
    }
  }
  const collapsed: Picture['collapsed'] = [];
  if (opts.collapse !== false) collapseRoutes(root, collapsed);
  return layout(root, { title, unattached, abbreviations, collapsed, drawn: drawnPaths.size, filtered });
}

/** The drawing of a route without its name: identical signatures draw identically. */
function signature(route: TreeNode): string {
  const pills = (n: TreeNode) => n.pills.map((p) => `${p.style}:${p.state}:${p.text}`);
  return JSON.stringify([
    route.label.split(' ')[0],
    pills(route),
    [...route.children.values()].map((r) => [r.label, pills(r), r.marks.map((m) => m.text)]),
  ]);
}

/** Rules of one route whose drawing is identical share one box (`rules read, write`). */
/**
 * Children of `parent` whose drawing is identical (same key), two or more: the first stays and is
 * told the whole group (`keep`), the others are removed.
 */
function collapseChildren(
  parent: TreeNode,
  key: (n: TreeNode) => string,
  keep: (first: TreeNode, group: TreeNode[]) => void,
): void {
  const groups = new Map<string, TreeNode[]>();
  for (const c of parent.children.values()) {
    const k = key(c);
    const g = groups.get(k);
    if (g) g.push(c);
    else groups.set(k, [c]);
  }
  for (const g of groups.values()) {
    if (g.length < 2) continue;
    const [first, ...rest] = g as [TreeNode, ...TreeNode[]];
    keep(first, g);
    for (const r of rest) parent.children.delete(r.key);
  }
}

function collapseRoutes(n: TreeNode, out: Picture['collapsed']): void {
  if (n.level < 2) {
    for (const c of n.children.values()) collapseRoutes(c, out);
    return;
  }
  if (n.level !== 2) return;
  // rules of one route whose drawing is identical share one box (`rules read, write`)
  for (const route of n.children.values())
    collapseChildren(
      route,
      (r) =>
        JSON.stringify([r.pills.map((p) => `${p.style}:${p.state}:${p.text}`), r.marks.map((m) => m.text)]),
      (first, g) => {
        first.label = `rules ${g.map((r) => r.label.slice('rule '.length)).join(', ')}`;
      },
    );
  collapseChildren(n, signature, (first, g) => {
    const names = g.map((r) => r.label.slice(r.label.indexOf(' ') + 1));
    first.members = names;
    out.push({ route: first.key, routes: names });
  });
}

interface Header {
  title: string;
  unattached: Picture['unattached'];
  abbreviations: string[];
  collapsed: Picture['collapsed'];
  drawn: number;
  filtered: number;
}

const MEMBERS_SHOWN = 8;

function titleLines(n: TreeNode): string[] {
  const lines = wrapText(n.label, NODE_W - 16);
  if (n.members) {
    const more = n.members.length - 1;
    const shown = n.members.slice(1, 1 + MEMBERS_SHOWN).join(', ');
    const rest = n.members.length - 1 - MEMBERS_SHOWN;
    lines.push(
      ...wrapText(
        `and ${more} more identical route${more === 1 ? '' : 's'}: ${shown}${rest > 0 ? `, and ${rest} more (hover for all)` : ''}`,
        NODE_W - 16,
      ),
    );
  }
  return lines;
}

function layout(root: TreeNode, h: Header): Picture {
  const pillLines = (p: PillSpec) => wrapText(p.text, TEXT_W);
  const markLines = (m: MarkSpec) => wrapText(m.text, TEXT_W);
  const itemH = (lines: string[]) => Math.max(PILL_H, lines.length * LINE + 5);
  const own = (n: TreeNode) =>
    10 +
    titleLines(n).length * LINE +
    n.pills.reduce((a, p) => a + itemH(pillLines(p)) + 3, 0) +
    n.marks.reduce((a, m) => a + itemH(markLines(m)) + 3, 0) +
    6;
  const measure = (n: TreeNode): number => {
    const kids = [...n.children.values()];
    const sum = kids.reduce((a, c) => a + measure(c), 0) + Math.max(0, kids.length - 1) * GAP;
    n.block = Math.max(n.level < 0 ? 0 : own(n), sum);
    return n.block;
  };
  const top = MARGIN + 88;
  measure(root);
  const parts: string[] = [];
  const pills: PillLayout[] = [];
  const marks: MarkLayout[] = [];
  const place = (n: TreeNode, y: number) => {
    if (n.level >= 0) {
      const height = own(n);
      const box = { x: MARGIN + n.level * COL, y: y + (n.block! - height) / 2, w: NODE_W, h: height };
      n.box = box;
      const tl = titleLines(n);
      parts.push(
        `<g>${n.members ? `<title>${esc(`${n.members.length} identical routes:\n${n.members.join('\n')}`)}</title>` : ''}`,
        `<rect x="${box.x}" y="${box.y}" width="${box.w}" height="${box.h}" rx="6" fill="#ffffff" stroke="#111827" stroke-width="${n.members ? 2.4 : 1.2}"${n.members ? ' stroke-dasharray="8 3"' : ''}/>`,
        textLines(
          box.x + 8,
          box.y + 15,
          tl.slice(0, 1),
          `font-size="12" font-weight="bold" ${FONT} fill="#111827"`,
        ),
        tl.length > 1
          ? textLines(box.x + 8, box.y + 15 + LINE, tl.slice(1), `font-size="11" ${FONT} fill="#374151"`)
          : '',
        '</g>',
      );
      let iy = box.y + 10 + tl.length * LINE;
      for (const p of n.pills) {
        const lines = pillLines(p);
        const c = PILL_COLORS[p.style];
        const faded = p.state === 'overridden';
        const pill = { x: box.x + 6, y: iy, w: NODE_W - 12, h: itemH(lines) };
        const badge = { x: pill.x + 1, y: pill.y + 1, w: 16, h: PILL_H - 2 };
        const dash =
          p.style === 'default'
            ? ' stroke-dasharray="4 2"'
            : p.style === 'unset'
              ? ' stroke-dasharray="1 2"'
              : '';
        const width = !faded && (p.style === 'override' || p.style === 'constraint') ? 2 : 1.2;
        parts.push(
          `<g><title>${esc(`${p.style}${faded ? ' (overridden)' : ''}: ${p.text}`)}</title>`,
          `<rect x="${pill.x}" y="${pill.y}" width="${pill.w}" height="${pill.h}" rx="4" fill="${faded ? OVERRIDDEN.fill : c.fill}" stroke="${faded ? OVERRIDDEN.stroke : c.stroke}" stroke-width="${width}"${dash}/>`,
          `<rect x="${badge.x}" y="${badge.y}" width="${badge.w}" height="${badge.h}" rx="3" fill="${faded ? OVERRIDDEN.badge : c.badge}"/>`,
          `<text x="${badge.x + 4}" y="${pill.y + 13}" font-size="11" font-weight="bold" ${FONT} fill="#ffffff">${c.letter}</text>`,
          textLines(
            badge.x + 21,
            pill.y + 13,
            lines,
            `font-size="11" ${FONT} fill="${faded ? OVERRIDDEN.text : '#111827'}"${faded ? ' text-decoration="line-through"' : ''}`,
          ),
          '</g>',
        );
        pills.push({ ...pill, policy: p.policy, style: p.style, target: n.key, state: p.state, badge });
        iy += pill.h + 3;
      }
      for (const m of n.marks) {
        const lines = markLines(m);
        const item = { x: box.x + 6, y: iy, w: NODE_W - 12, h: itemH(lines) };
        const refused = m.kind === 'refused';
        parts.push(
          `<g><title>${esc(m.title)}</title>`,
          `<rect x="${item.x + 1}" y="${item.y + 1}" width="16" height="${PILL_H - 2}" rx="8" fill="${refused ? REFUSED_BADGE : EFFECTIVE_BADGE}"/>`,
          `<text x="${item.x + 5}" y="${item.y + 13}" font-size="11" font-weight="bold" ${FONT} fill="#ffffff">${refused ? '!' : '='}</text>`,
          textLines(
            item.x + 22,
            item.y + 13,
            lines,
            `font-size="11" ${FONT} fill="${refused ? REFUSED_BADGE : '#134e4a'}"`,
          ),
          '</g>',
        );
        marks.push({
          x: item.x + 1,
          y: item.y + 1,
          w: 16,
          h: PILL_H - 2,
          kind: m.kind,
          target: n.key,
          text: m.text,
        });
        iy += item.h + 3;
      }
    }
    let cy = y;
    for (const c of n.children.values()) {
      place(c, cy);
      if (n.box && c.box) {
        const x1 = n.box.x + n.box.w;
        const y1 = n.box.y + n.box.h / 2;
        const x2 = c.box.x;
        const y2 = c.box.y + c.box.h / 2;
        const mx = (x1 + x2) / 2;
        parts.unshift(
          `<path d="M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}" fill="none" stroke="#9ca3af" stroke-width="1.5"/>`,
        );
      }
      cy += c.block! + GAP;
    }
  };
  place(root, top);
  let height = top + root.block! + MARGIN;
  const width = MARGIN * 2 + 4 * COL + NODE_W;
  const routes = h.collapsed.reduce((a, c) => a + c.routes.length - 1, 0);
  const summary = `${h.drawn} path${h.drawn === 1 ? '' : 's'} drawn${h.filtered ? `, ${h.filtered} left out by the filters` : ''}${h.collapsed.length ? `; ${routes + h.collapsed.length} identical routes drawn as ${h.collapsed.length} (dashed boxes)` : ''}`;
  const header: string[] = [
    `<text x="${MARGIN}" y="${MARGIN + 14}" font-size="16" font-weight="bold" ${FONT} fill="#111827">${esc(h.title)}</text>`,
    `<text x="${MARGIN}" y="${MARGIN + 32}" font-size="11" ${FONT} fill="#6b7280">${esc(summary)}</text>`,
    ...LEVEL_NAMES.map(
      (l, i) =>
        `<text x="${MARGIN + i * COL}" y="${top - 10}" font-size="11" ${FONT} fill="#6b7280">${l}</text>`,
    ),
  ];
  let lx = MARGIN;
  const legend: [string, string, string][] = [
    ...Object.entries(PILL_COLORS).map(
      ([style, c]) => [c.badge, c.letter, style] as [string, string, string],
    ),
    [OVERRIDDEN.badge, '-', 'overridden'],
    [EFFECTIVE_BADGE, '=', 'effective'],
    [REFUSED_BADGE, '!', 'refused unset'],
  ];
  for (const [color, letter, text] of legend) {
    header.push(
      `<rect x="${lx}" y="${MARGIN + 44}" width="16" height="16" rx="3" fill="${color}"/>`,
      `<text x="${lx + 4}" y="${MARGIN + 56}" font-size="11" font-weight="bold" ${FONT} fill="#ffffff">${letter}</text>`,
      `<text x="${lx + 21}" y="${MARGIN + 56}" font-size="11" ${FONT} fill="#111827">${text}</text>`,
    );
    lx += 40 + text.length * 6.8;
  }
  header.push(
    `<text x="${lx + 10}" y="${MARGIN + 56}" font-size="11" ${FONT} fill="#6b7280">${esc(h.abbreviations.join(', '))}</text>`,
  );
  if (h.drawn === 0)
    header.push(
      `<text x="${MARGIN}" y="${top + 14}" font-size="12" ${FONT} fill="#6b7280">${h.filtered ? 'no path matches the filters' : 'no route is attached to a gateway'}</text>`,
    );
  if (h.unattached.length) {
    header.push(
      `<text x="${MARGIN}" y="${height + 4}" font-size="12" font-weight="bold" ${FONT} fill="#111827">Not attached</text>`,
    );
    height += 12;
    for (const u of h.unattached) {
      const lines = wrapText(`${u.policy}: ${u.why}`, width - 2 * MARGIN);
      header.push(textLines(MARGIN, height + 10, lines, `font-size="11" ${FONT} fill="#b91c1c"`));
      height += 4 + lines.length * LINE;
    }
    height += MARGIN;
  }
  return {
    svg: wrap(width, Math.ceil(height), [...header, ...parts]),
    width,
    height: Math.ceil(height),
    pills,
    marks,
    cells: [],
    unattached: h.unattached,
    collapsed: h.collapsed,
  };
}
