// SVG building blocks shared by the pictures (hierarchy.ts, grid.ts): colours, text wrapping, the
// layout types a test checks pixels against, and stacking two pictures into one SVG.

export type PillStyle = 'default' | 'override' | 'constraint' | 'intent' | 'unset';

export const PILL_COLORS: Record<PillStyle, { fill: string; stroke: string; badge: string; letter: string }> =
  {
    default: { fill: '#dbeafe', stroke: '#2563eb', badge: '#2563eb', letter: 'D' },
    override: { fill: '#fee2e2', stroke: '#dc2626', badge: '#dc2626', letter: 'O' },
    constraint: { fill: '#ede9fe', stroke: '#7c3aed', badge: '#7c3aed', letter: 'C' },
    intent: { fill: '#f3f4f6', stroke: '#4b5563', badge: '#4b5563', letter: 'I' },
    unset: { fill: '#ffffff', stroke: '#9ca3af', badge: '#f59e0b', letter: 'U' },
  };
/** A policy block that wins nothing on any path below where it attaches: drawn faded, grey badge. */
export const OVERRIDDEN = { fill: '#f9fafb', stroke: '#d1d5db', badge: '#9ca3af', text: '#6b7280' };
/** The badge of a refused unset and of an effective rule line. */
export const REFUSED_BADGE = '#b91c1c';
export const EFFECTIVE_BADGE = '#0f766e';

export const CELL_COLORS = {
  allow: '#16a34a',
  deny: '#dc2626',
  mixed: '#f59e0b',
  self: '#d1d5db',
} as const;
export type CellState = keyof typeof CELL_COLORS;
/** Each state has a glyph too, so the grid reads without colour (mixed cells carry a note number). */
export const CELL_GLYPHS: Record<Exclude<CellState, 'mixed'>, string> = { allow: '✓', deny: '✗', self: '·' };

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
  /** live: some rule of the block is effective below; overridden: none is anywhere below. */
  state: 'live' | 'overridden';
  /** Where the solid badge is: the pixel to look at. */
  badge: Box;
}

export interface MarkLayout extends Box {
  /** effective: a rule's winning value at a route rule; refused: an unset that had no effect. */
  kind: 'effective' | 'refused';
  target: string;
  text: string;
}

export interface CellLayout extends Box {
  from: string;
  to: string;
  state: CellState;
  /** The note number of a mixed cell (its ports are listed under the grid). */
  note?: number;
}

export interface Picture {
  svg: string;
  width: number;
  height: number;
  pills: PillLayout[];
  marks: MarkLayout[];
  cells: CellLayout[];
  /** Policies drawn in the "not attached" list, with why. */
  unattached: { policy: string; why: string }[];
  /** Routes drawn once for several identical ones: the drawn route and the ones it stands for. */
  collapsed: { route: string; routes: string[] }[];
}

export const esc = (s: string): string =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
export const FONT = 'font-family="DejaVu Sans, Verdana, sans-serif"';
/** Average advance of an 11px DejaVu Sans glyph (a little generous: wrapped text never overflows). */
export const CHAR = 6.8;
export const LINE = 13;

/**
 * Text broken into lines that fit `px` (11px font): at spaces first, then after `/ , . - _ :` inside a
 * long word, then anywhere. Nothing is cut.
 */
export function wrapText(text: string, px: number): string[] {
  const max = Math.max(4, Math.floor(px / CHAR));
  const lines: string[] = [];
  let cur = '';
  const pushWord = (word: string) => {
    let w = word;
    while (w.length > max) {
      const room = max - (cur ? cur.length + 1 : 0);
      if (room < 4) {
        lines.push(cur);
        cur = '';
        continue;
      }
      let cut = -1;
      for (let i = Math.min(room, w.length) - 1; i > 0; i--)
        if ('/,.-_:'.includes(w[i]!)) {
          cut = i + 1;
          break;
        }
      if (cut < 0) cut = room;
      lines.push(cur ? `${cur} ${w.slice(0, cut)}` : w.slice(0, cut));
      cur = '';
      w = w.slice(cut);
    }
    if (!cur) cur = w;
    else if (cur.length + 1 + w.length <= max) cur = `${cur} ${w}`;
    else {
      lines.push(cur);
      cur = w;
    }
  };
  for (const word of text.split(/\s+/).filter(Boolean)) pushWord(word);
  if (cur || lines.length === 0) lines.push(cur);
  return lines;
}

/** `<text>` with one `<tspan>` per line. */
export function textLines(
  x: number,
  y: number,
  lines: string[],
  attrs = `font-size="11" ${FONT} fill="#111827"`,
): string {
  return `<text x="${x}" y="${y}" ${attrs}>${lines
    .map((l, i) => `<tspan x="${x}" dy="${i === 0 ? 0 : LINE}">${esc(l)}</tspan>`)
    .join('')}</text>`;
}

export function wrap(width: number, height: number, parts: string[]): string {
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
    marks: [...a.marks, ...b.marks.map(shift)],
    cells: [...a.cells, ...b.cells.map(shift)],
    unattached: [...a.unattached, ...b.unattached],
    collapsed: [...a.collapsed, ...b.collapsed],
  };
}
