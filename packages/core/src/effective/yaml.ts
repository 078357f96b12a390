// A small, fast YAML emitter for plain data (the `yaml` package takes ~40 us per node, too slow for
// rendering tens of thousands of entries per change). Block style; strings are plain when that is
// unambiguous, single-quoted otherwise, JSON-quoted (valid YAML double-quoted scalars) when they hold
// control characters. parse(toYaml(x)) == x.

const PLAIN = /^[A-Za-z_/][A-Za-z0-9_ ./()@,-]*$/;
const RESERVED = /^(true|false|null|yes|no|on|off|y|n|~)$/i;
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\ufeff]/;

function scalar(v: unknown): string {
  if (typeof v === 'string') {
    if (PLAIN.test(v) && !RESERVED.test(v) && !v.endsWith(' ')) return v;
    // Single quotes read best (only ' is escaped, as ''); control characters need double quotes.
    return CONTROL.test(v) ? JSON.stringify(v) : `'${v.replaceAll("'", "''")}'`;
  }
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : JSON.stringify(String(v));
  if (typeof v === 'boolean') return String(v);
  return 'null';
}

const isObj = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const empty = (v: unknown) => (Array.isArray(v) ? v.length === 0 : isObj(v) && Object.keys(v).length === 0);
const inline = (v: unknown) => (Array.isArray(v) ? '[]' : isObj(v) ? '{}' : scalar(v));

function emit(v: unknown, pad: string, out: string[]): void {
  if (Array.isArray(v)) {
    for (const x of v) {
      if (!empty(x) && (Array.isArray(x) || isObj(x))) {
        const start = out.length;
        emit(x, `${pad}  `, out);
        out[start] = `${pad}- ${out[start]!.slice(pad.length + 2)}`;
      } else out.push(`${pad}- ${inline(x)}`);
    }
    return;
  }
  if (isObj(v)) {
    for (const [k, x] of Object.entries(v)) {
      const key = scalar(k);
      if (!empty(x) && (Array.isArray(x) || isObj(x))) {
        out.push(`${pad}${key}:`);
        emit(x, `${pad}  `, out);
      } else out.push(`${pad}${key}: ${inline(x)}`);
    }
    return;
  }
  out.push(`${pad}${scalar(v)}`);
}

export function toYaml(v: unknown): string {
  if (empty(v) || !(Array.isArray(v) || isObj(v))) return `${inline(v)}\n`;
  const out: string[] = [];
  emit(v, '', out);
  return `${out.join('\n')}\n`;
}
