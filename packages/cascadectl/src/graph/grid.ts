// The network-policy connectivity grid as an SVG: rows are sources, columns destinations, grouped by
// namespace. Each cell counts only the ports its destination serves (its declared container ports;
// every port in use when it declares none), and reads without colour too: ✓ allowed on every port,
// ✗ denied on every one, a note number when only some are allowed (listed under the grid with each
// port's verdict, so a PNG shows it, not only a hover), · the pod itself.
import { mapConnection, type NetpolEngine, PROTO, PROTO_NAMES } from '@cascade/netpolicy';
import {
  CELL_COLORS,
  CELL_GLYPHS,
  type CellLayout,
  type CellState,
  CHAR,
  esc,
  FONT,
  LINE,
  type Picture,
  textLines,
  wrap,
  wrapText,
} from './svg.ts';

const CELL = 26;
const MARGIN = 20;
const BAND = 16;

export interface GridOptions {
  title?: string;
  /** Only these pods are rows and columns (namespace, label filters). */
  include?: (pod: { namespace: string; name: string; labels: Record<string, string> }) => boolean;
}

export function gridPicture(
  engine: NetpolEngine,
  ports: [number, number][],
  opts: GridOptions = {},
): Picture {
  const title = opts.title ?? 'Network policy: who can connect to whom';
  const pods = [...engine.pods.values()]
    .filter((p) => !opts.include || opts.include(p))
    .map((p) => ({
      ns: p.namespace,
      name: `${p.namespace}/${p.name}`,
      short: p.name,
      ip: p.ips[0]!,
      served: p.ports.length
        ? p.ports.map((cp) => [PROTO[cp.protocol], cp.port] as [number, number])
        : undefined,
    }))
    .sort((a, b) =>
      a.ns < b.ns ? -1 : a.ns > b.ns ? 1 : a.short < b.short ? -1 : a.short > b.short ? 1 : 0,
    );
  const groups: { ns: string; from: number; to: number }[] = [];
  pods.forEach((p, i) => {
    const g = groups[groups.length - 1];
    if (g && g.ns === p.ns) g.to = i;
    else groups.push({ ns: p.ns, from: i, to: i });
  });
  const labelW = Math.max(80, ...pods.map((p) => p.short.length * CHAR + 12));
  const nsW = Math.max(60, ...groups.map((g) => g.ns.length * CHAR + 12));
  const portText = (pp: [number, number]) => `${PROTO_NAMES[pp[0]] ?? pp[0]}/${pp[1]}`;
  const subtitle = `rows: from, columns: to. A cell counts the ports its destination serves (declared container ports; else every port in use: ${ports.map(portText).join(', ') || 'none'})`;
  const width0 = MARGIN * 2 + 640;
  const subLines = wrapText(subtitle, width0 - 2 * MARGIN);
  const top = MARGIN + 30 + subLines.length * LINE + BAND + labelW;
  const left = MARGIN + BAND + nsW + labelW;
  const parts: string[] = [
    `<text x="${MARGIN}" y="${MARGIN + 14}" font-size="16" font-weight="bold" ${FONT} fill="#111827">${esc(title)}</text>`,
    textLines(MARGIN, MARGIN + 32, subLines, `font-size="11" ${FONT} fill="#6b7280"`),
  ];
  // namespace bands above the columns and left of the rows, with separators between namespaces
  const gridW = pods.length * CELL;
  for (const [k, g] of groups.entries()) {
    const shade = k % 2 === 0 ? '#f3f4f6' : '#e5e7eb';
    const x = left + g.from * CELL;
    const y = top + g.from * CELL;
    const span = (g.to - g.from + 1) * CELL;
    parts.push(
      `<g><title>namespace ${esc(g.ns)}</title><rect x="${x}" y="${top - labelW - BAND}" width="${span}" height="${BAND}" fill="${shade}"/>`,
      `<text x="${x + 3}" y="${top - labelW - 4}" font-size="10" font-weight="bold" ${FONT} fill="#374151">${esc(span >= g.ns.length * 6 ? g.ns : `${g.ns.slice(0, Math.max(1, Math.floor(span / 6) - 1))}…`)}</text></g>`,
      `<rect x="${MARGIN}" y="${y}" width="${BAND + nsW - 4}" height="${span}" fill="${shade}"/>`,
      `<text x="${MARGIN + 4}" y="${y + Math.min(span, CELL) / 2 + 4}" font-size="10" font-weight="bold" ${FONT} fill="#374151">${esc(g.ns)}</text>`,
    );
    if (g.from > 0)
      parts.push(
        `<line x1="${x}" y1="${top - labelW - BAND}" x2="${x}" y2="${top + gridW}" stroke="#6b7280" stroke-width="1.5"/>`,
        `<line x1="${MARGIN}" y1="${y}" x2="${left + gridW}" y2="${y}" stroke="#6b7280" stroke-width="1.5"/>`,
      );
  }
  const cells: CellLayout[] = [];
  const notes: string[] = [];
  pods.forEach((to, j) => {
    const x = left + j * CELL + CELL / 2;
    parts.push(
      `<text transform="translate(${x + 4},${top - 6}) rotate(-90)" font-size="11" ${FONT} fill="#111827">${esc(to.short)}</text>`,
    );
  });
  pods.forEach((from, i) => {
    const y = top + i * CELL;
    parts.push(
      `<text x="${left - 6}" y="${y + CELL / 2 + 4}" text-anchor="end" font-size="11" ${FONT} fill="#111827">${esc(from.short)}</text>`,
    );
    pods.forEach((to, j) => {
      const x = left + j * CELL;
      let state: CellState;
      let note: number | undefined;
      const allowed: string[] = [];
      const denied: string[] = [];
      const over = to.served ?? ports;
      if (i === j) state = 'self';
      else {
        for (const pp of over)
          (mapConnection(engine, from.ip, to.ip, pp[0], pp[1]).verdict === 'allow' ? allowed : denied).push(
            portText(pp),
          );
        state = denied.length === 0 && allowed.length ? 'allow' : allowed.length === 0 ? 'deny' : 'mixed';
        if (state === 'mixed') {
          note = notes.length + 1;
          notes.push(
            `${note}. ${from.name} -> ${to.name}: allowed ${allowed.join(', ')}; denied ${denied.join(', ')}`,
          );
        }
      }
      const what =
        i === j
          ? 'itself (always allowed)'
          : `${allowed.length ? `allowed ${allowed.join(', ')}` : ''}${allowed.length && denied.length ? '; ' : ''}${denied.length ? `denied ${denied.join(', ')}` : ''}${over.length ? '' : 'no port to judge'}`;
      const glyph = state === 'mixed' ? String(note) : CELL_GLYPHS[state];
      parts.push(
        `<g><title>${esc(`${from.name} -> ${to.name}: ${what}`)}</title>`,
        `<rect x="${x + 1}" y="${y + 1}" width="${CELL - 2}" height="${CELL - 2}" rx="3" fill="${CELL_COLORS[state]}"/>`,
        `<text x="${x + CELL / 2}" y="${y + CELL / 2 + 5}" text-anchor="middle" font-size="${glyph.length > 2 ? 9 : 13}" font-weight="bold" ${FONT} fill="${state === 'self' ? '#374151' : '#ffffff'}">${esc(glyph)}</text></g>`,
      );
      cells.push({
        x: x + 1,
        y: y + 1,
        w: CELL - 2,
        h: CELL - 2,
        from: from.name,
        to: to.name,
        state,
        ...(note ? { note } : {}),
      });
    });
  });
  let ly = top + pods.length * CELL + 20;
  const legend: [CellState, string][] = [
    ['allow', `${CELL_GLYPHS.allow} allowed on every port the destination serves`],
    ['mixed', 'N allowed on some: note N below lists each port'],
    ['deny', `${CELL_GLYPHS.deny} denied on every port`],
    ['self', `${CELL_GLYPHS.self} itself`],
  ];
  for (const [s, text] of legend) {
    parts.push(
      `<rect x="${MARGIN}" y="${ly}" width="14" height="14" rx="3" fill="${CELL_COLORS[s]}"/>`,
      `<text x="${MARGIN + 20}" y="${ly + 11}" font-size="11" ${FONT} fill="#111827">${esc(text)}</text>`,
    );
    ly += 18;
  }
  const width = Math.ceil(Math.max(left + gridW + MARGIN, width0));
  if (notes.length) {
    ly += 8;
    parts.push(
      `<text x="${MARGIN}" y="${ly + 4}" font-size="12" font-weight="bold" ${FONT} fill="#111827">Allowed on some ports</text>`,
    );
    ly += 12;
    for (const n of notes) {
      const lines = wrapText(n, width - 2 * MARGIN);
      parts.push(textLines(MARGIN, ly + 10, lines));
      ly += 4 + lines.length * LINE;
    }
  }
  if (pods.length === 0)
    parts.push(`<text x="${MARGIN}" y="${ly + 14}" font-size="12" ${FONT} fill="#6b7280">no pods</text>`);
  const height = Math.ceil(ly + MARGIN + 14);
  return {
    svg: wrap(width, height, parts),
    width,
    height,
    pills: [],
    marks: [],
    cells,
    unattached: [],
    collapsed: [],
  };
}
