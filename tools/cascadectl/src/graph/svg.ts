// SVG pictures: the Gateway API hierarchy with every policy drawn where it attaches (defaults,
// overrides, constraints, bare rules and unsets each in their own style), and the network-policy
// connectivity matrix as a colored grid. Plain functions of the engines; the layout is returned
// with the SVG so that a test can look at the rendered pixels where each shape must be.
import { objectKeysOfPath, type PolicyEngine } from '@cascade/core';
import { mapConnection, type NetpolEngine, PROTO_NAMES } from '@cascade/netpolicy';

export type PillStyle = 'default' | 'override' | 'constraint' | 'intent' | 'unset';

export const PILL_COLORS: Record<PillStyle, { fill: string; stroke: string; badge: string; letter: string }> =
  {
    default: { fill: '#dbeafe', stroke: '#2563eb', badge: '#2563eb', letter: 'D' },
    override: { fill: '#fee2e2', stroke: '#dc2626', badge: '#dc2626', letter: 'O' },
    constraint: { fill: '#ede9fe', stroke: '#7c3aed', badge: '#7c3aed', letter: 'C' },
    intent: { fill: '#f3f4f6', stroke: '#4b5563', badge: '#4b5563', letter: 'I' },
    unset: { fill: '#ffffff', stroke: '#9ca3af', badge: '#f59e0b', letter: 'U' },
  };

export const CELL_COLORS = {
  allow: '#16a34a',
  deny: '#dc2626',
  mixed: '#f59e0b',
  self: '#d1d5db',
} as const;
export type CellState = keyof typeof CELL_COLORS;

export interface Box {
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface PillLayout extends Box {
  policy: string;
  style: PillStyle;
  target: string;
  /** Where the solid badge is: the pixel to look at. */
  badge: Box;
}

export interface CellLayout extends Box {
  from: string;
  to: string;
  state: CellState;
}

export interface Picture {
  svg: string;
  width: number;
  height: number;
  pills: PillLayout[];
  cells: CellLayout[];
  /** Policies drawn in the "not attached" list, with why. */
  unattached: { policy: string; why: string }[];
}

const esc = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const FONT = 'font-family="DejaVu Sans, Verdana, sans-serif"';
const CHAR = 6.6; // average advance of an 11px DejaVu Sans glyph
const clip = (s: string, px: number) => {
  const n = Math.floor(px / CHAR);
  return s.length > n ? `${s.slice(0, Math.max(1, n - 1))}…` : s;
};

// ---- the hierarchy ----------------------------------------------------------------------------

interface TreeNode {
  key: string;
  level: number;
  label: string;
  children: Map<string, TreeNode>;
  pills: { policy: string; style: PillStyle; text: string }[];
  box?: Box;
  block?: number;
}

const LEVEL_NAMES = ['GatewayClass', 'Gateway', 'Listener', 'Route', 'Rule'];
const COL = 320;
const NODE_W = 300;
const PILL_H = 18;
const TITLE_H = 22;
const GAP = 10;
const MARGIN = 20;

function labelOf(level: number, key: string): string {
  const [, rest = key] = /^[A-Za-z]+:(.*)$/.exec(key) ?? [];
  if (level === 2 || level === 4) return `${level === 2 ? 'listener' : 'rule'} ${rest.split('#')[1]}`;
  const kind = key.slice(0, key.indexOf(':'));
  return `${kind} ${rest}`;
}

/** AuthPolicy -> AP, RateLimitPolicy -> RLP: the capitals of the kind. */
export function abbreviate(kind: string): string {
  return kind.replace(/[^A-Z]/g, '') || kind;
}

function isConstraint(rules: { name: string }[]): boolean {
  return rules.length > 0 && rules.every((r) => r.name === '*');
}

export function gatewayPicture(engines: Iterable<PolicyEngine>, title = 'Gateway API policies'): Picture {
  const list = [...engines];
  const root: TreeNode = { key: '', level: -1, label: '', children: new Map(), pills: [] };
  const nodes = new Map<string, TreeNode>();
  const seen = new Set<string>();
  for (const engine of list)
    for (const [path] of engine.results()) {
      const keys = objectKeysOfPath(path);
      const pk = keys.join('|');
      if (seen.has(pk)) continue;
      seen.add(pk);
      let parent = root;
      keys.forEach((k, level) => {
        let n = parent.children.get(k);
        if (!n) {
          n = { key: k, level, label: labelOf(level, k), children: new Map(), pills: [] };
          parent.children.set(k, n);
          nodes.set(k, n);
        }
        parent = n;
      });
    }
  // Policies, drawn at each object they target.
  const unattached: Picture['unattached'] = [];
  const abbreviations: string[] = [];
  for (const engine of list) {
    const short = abbreviate(engine.kind.kind);
    abbreviations.push(`${short} = ${engine.kind.kind}`);
    for (const id of [...engine.policyIds()].sort()) {
      const st = engine.policy(id)!;
      const name = `${st.object.metadata.namespace}/${st.object.metadata.name}`;
      const policy = `${engine.kind.kind} ${name}`;
      if (!st.policy) {
        unattached.push({ policy, why: `Invalid: ${st.errors[0] ?? 'rejected'}` });
        continue;
      }
      const pills: TreeNode['pills'] = [];
      for (const b of st.policy.blocks) {
        const style: PillStyle =
          b.as === 'override' ? (isConstraint(b.rules) ? 'constraint' : 'override') : b.as;
        const what = b.rules.map((r) => r.key).join(', ');
        pills.push({ policy, style, text: `${short} ${name}${what ? `: ${what}` : ''}` });
      }
      if (st.policy.unset.length)
        pills.push({ policy, style: 'unset', text: `${short} ${name}: unset ${st.policy.unset.join(', ')}` });
      for (const t of st.policy.targets) {
        const n = nodes.get(t.key);
        if (!n) {
          unattached.push({ policy, why: `target ${t.key} is not found or has no attached route` });
          continue;
        }
        n.pills.push(...pills);
      }
    }
  }
  // Layout: each node's block is the larger of its own height and its children's blocks.
  const own = (n: TreeNode) => TITLE_H + n.pills.length * (PILL_H + 3) + 6;
  const measure = (n: TreeNode): number => {
    const kids = [...n.children.values()];
    const sum = kids.reduce((a, c) => a + measure(c), 0) + Math.max(0, kids.length - 1) * GAP;
    n.block = Math.max(n.level < 0 ? 0 : own(n), sum);
    return n.block;
  };
  const top = MARGIN + 70;
  measure(root);
  const parts: string[] = [];
  const pills: PillLayout[] = [];
  const place = (n: TreeNode, y: number) => {
    if (n.level >= 0) {
      const h = own(n);
      const box = { x: MARGIN + n.level * COL, y: y + (n.block! - h) / 2, w: NODE_W, h };
      n.box = box;
      parts.push(
        `<rect x="${box.x}" y="${box.y}" width="${box.w}" height="${box.h}" rx="6" fill="#ffffff" stroke="#111827" stroke-width="1.2"/>`,
        `<text x="${box.x + 8}" y="${box.y + 15}" font-size="12" font-weight="bold" ${FONT} fill="#111827">${esc(clip(n.label, NODE_W - 16))}</text>`,
      );
      n.pills.forEach((p, i) => {
        const c = PILL_COLORS[p.style];
        const py = box.y + TITLE_H + i * (PILL_H + 3);
        const pill = { x: box.x + 6, y: py, w: NODE_W - 12, h: PILL_H };
        const badge = { x: pill.x + 1, y: pill.y + 1, w: 16, h: PILL_H - 2 };
        const dash =
          p.style === 'default'
            ? ' stroke-dasharray="4 2"'
            : p.style === 'unset'
              ? ' stroke-dasharray="1 2"'
              : '';
        const width = p.style === 'override' || p.style === 'constraint' ? 2 : 1.2;
        parts.push(
          `<g><title>${esc(`${p.style}: ${p.text}`)}</title>`,
          `<rect x="${pill.x}" y="${pill.y}" width="${pill.w}" height="${pill.h}" rx="4" fill="${c.fill}" stroke="${c.stroke}" stroke-width="${width}"${dash}/>`,
          `<rect x="${badge.x}" y="${badge.y}" width="${badge.w}" height="${badge.h}" rx="3" fill="${c.badge}"/>`,
          `<text x="${badge.x + 4}" y="${pill.y + 13}" font-size="11" font-weight="bold" ${FONT} fill="#ffffff">${c.letter}</text>`,
          `<text x="${badge.x + 21}" y="${pill.y + 13}" font-size="11" ${FONT} fill="#111827">${esc(clip(p.text, pill.w - 26))}</text></g>`,
        );
        pills.push({ ...pill, policy: p.policy, style: p.style, target: n.key, badge });
      });
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
  const header: string[] = [
    `<text x="${MARGIN}" y="${MARGIN + 14}" font-size="16" font-weight="bold" ${FONT} fill="#111827">${esc(title)}</text>`,
    ...LEVEL_NAMES.map(
      (l, i) =>
        `<text x="${MARGIN + i * COL}" y="${top - 10}" font-size="11" ${FONT} fill="#6b7280">${l}</text>`,
    ),
  ];
  let lx = MARGIN;
  for (const [style, c] of Object.entries(PILL_COLORS)) {
    header.push(
      `<rect x="${lx}" y="${MARGIN + 26}" width="16" height="16" rx="3" fill="${c.badge}"/>`,
      `<text x="${lx + 4}" y="${MARGIN + 38}" font-size="11" font-weight="bold" ${FONT} fill="#ffffff">${c.letter}</text>`,
      `<text x="${lx + 21}" y="${MARGIN + 38}" font-size="11" ${FONT} fill="#111827">${style}</text>`,
    );
    lx += 120;
  }
  header.push(
    `<text x="${lx + 10}" y="${MARGIN + 38}" font-size="11" ${FONT} fill="#6b7280">${esc(abbreviations.join(', '))}</text>`,
  );
  if (seen.size === 0)
    header.push(
      `<text x="${MARGIN}" y="${top + 14}" font-size="12" ${FONT} fill="#6b7280">no route is attached to a gateway</text>`,
    );
  if (unattached.length) {
    header.push(
      `<text x="${MARGIN}" y="${height + 4}" font-size="12" font-weight="bold" ${FONT} fill="#111827">Not attached</text>`,
    );
    height += 12;
    for (const u of unattached) {
      header.push(
        `<text x="${MARGIN}" y="${height + 10}" font-size="11" ${FONT} fill="#b91c1c">${esc(`${u.policy}: ${u.why}`)}</text>`,
      );
      height += 16;
    }
    height += MARGIN;
  }
  return { svg: wrap(width, height, [...header, ...parts]), width, height, pills, cells: [], unattached };
}

// ---- the connectivity matrix ------------------------------------------------------------------

const CELL = 26;

export function netpolPicture(
  engine: NetpolEngine,
  ports: [number, number][],
  title = 'Network policy: who can connect to whom',
): Picture {
  const pods = [...engine.pods.values()]
    .map((p) => ({ name: `${p.namespace}/${p.name}`, ip: p.ips[0]! }))
    .sort((a, b) => (a.name < b.name ? -1 : 1));
  const labelW = Math.max(80, ...pods.map((p) => p.name.length * CHAR + 12));
  const subtitle = `rows: from, columns: to; over ${ports.map(([pr, po]) => `${PROTO_NAMES[pr] ?? pr}/${po}`).join(', ')}`;
  const top = MARGIN + 50 + labelW;
  const left = MARGIN + labelW;
  const parts: string[] = [
    `<text x="${MARGIN}" y="${MARGIN + 14}" font-size="16" font-weight="bold" ${FONT} fill="#111827">${esc(title)}</text>`,
    `<text x="${MARGIN}" y="${MARGIN + 32}" font-size="11" ${FONT} fill="#6b7280">${esc(subtitle)}</text>`,
  ];
  const cells: CellLayout[] = [];
  pods.forEach((to, j) => {
    const x = left + j * CELL + CELL / 2;
    parts.push(
      `<text transform="translate(${x + 4},${top - 6}) rotate(-90)" font-size="11" ${FONT} fill="#111827">${esc(to.name)}</text>`,
    );
  });
  pods.forEach((from, i) => {
    const y = top + i * CELL;
    parts.push(
      `<text x="${left - 6}" y="${y + CELL / 2 + 4}" text-anchor="end" font-size="11" ${FONT} fill="#111827">${esc(from.name)}</text>`,
    );
    pods.forEach((to, j) => {
      const x = left + j * CELL;
      let state: CellState;
      const detail: string[] = [];
      if (i === j) state = 'self';
      else {
        let allow = 0;
        for (const [proto, port] of ports) {
          const v = mapConnection(engine, from.ip, to.ip, proto, port).verdict;
          if (v === 'allow') allow++;
          detail.push(`${PROTO_NAMES[proto] ?? proto}/${port} ${v}`);
        }
        state = allow === ports.length ? 'allow' : allow === 0 ? 'deny' : 'mixed';
      }
      parts.push(
        `<g><title>${esc(`${from.name} -> ${to.name}: ${i === j ? 'itself (always allowed)' : detail.join(', ')}`)}</title>`,
        `<rect x="${x + 1}" y="${y + 1}" width="${CELL - 2}" height="${CELL - 2}" rx="3" fill="${CELL_COLORS[state]}"/></g>`,
      );
      cells.push({ x: x + 1, y: y + 1, w: CELL - 2, h: CELL - 2, from: from.name, to: to.name, state });
    });
  });
  let ly = top + pods.length * CELL + 20;
  const legend: [CellState, string][] = [
    ['allow', 'allowed on every port'],
    ['mixed', 'allowed on some ports'],
    ['deny', 'denied on every port'],
    ['self', 'itself'],
  ];
  for (const [s, text] of legend) {
    parts.push(
      `<rect x="${MARGIN}" y="${ly}" width="14" height="14" rx="3" fill="${CELL_COLORS[s]}"/>`,
      `<text x="${MARGIN + 20}" y="${ly + 11}" font-size="11" ${FONT} fill="#111827">${text}</text>`,
    );
    ly += 18;
  }
  if (pods.length === 0)
    parts.push(`<text x="${MARGIN}" y="${ly + 14}" font-size="12" ${FONT} fill="#6b7280">no pods</text>`);
  const width = Math.ceil(
    Math.max(left + pods.length * CELL + MARGIN, MARGIN * 2 + subtitle.length * CHAR, MARGIN * 2 + 340),
  );
  const height = Math.ceil(ly + MARGIN + 14);
  return { svg: wrap(width, height, parts), width, height, pills: [], cells, unattached: [] };
}

function wrap(width: number, height: number, parts: string[]): string {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">`,
    `<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`,
    ...parts,
    '</svg>',
    '',
  ].join('\n');
}

/** Two pictures one above the other, in one SVG (layouts shifted to match). */
export function stack(a: Picture, b: Picture): Picture {
  const width = Math.max(a.width, b.width);
  const height = a.height + b.height;
  const inner = (p: Picture) => p.svg.split('\n').slice(2, -2).join('\n');
  const shift = <T extends Box>(x: T): T => ({ ...x, y: x.y + a.height });
  return {
    svg: wrap(width, height, [
      inner(a),
      `<line x1="0" y1="${a.height}" x2="${width}" y2="${a.height}" stroke="#e5e7eb" stroke-width="2"/>`,
      `<g transform="translate(0,${a.height})">`,
      inner(b),
      '</g>',
    ]),
    width,
    height,
    pills: [...a.pills, ...b.pills.map((p) => ({ ...shift(p), badge: shift(p.badge) }))],
    cells: [...a.cells, ...b.cells.map(shift)],
    unattached: [...a.unattached, ...b.unattached],
  };
}
