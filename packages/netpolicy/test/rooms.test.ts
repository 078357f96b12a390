// The package's rooms (README "Layout"): engine/ is pure and imports none of the others; cluster/ is
// what both programs read and imports the engine only; agent/ and controller/ import engine/ and
// cluster/, never each other. This test reads every source file's relative imports (tests included)
// and fails on an import that crosses a wall.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = resolve(import.meta.dirname, '../src');
/** room -> the rooms it may import from (itself always) */
const ALLOWED: Record<string, string[]> = {
  engine: [],
  cluster: ['engine'],
  agent: ['engine', 'cluster'],
  controller: ['engine', 'cluster'],
};

const IMPORT = /(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g;

/** The crossings in one file's text, as "file -> target" lines. */
export function crossings(file: string, text: string): string[] {
  const rel = relative(SRC, file);
  const room = rel.split('/')[0] ?? '';
  if (!(room in ALLOWED)) return [];
  const out: string[] = [];
  for (const m of text.matchAll(IMPORT)) {
    const target = relative(SRC, resolve(dirname(file), m[1] ?? ''));
    const to = target.split('/')[0] ?? '';
    if (to === room || target.startsWith('..')) continue;
    if (!ALLOWED[room]?.includes(to)) out.push(`${rel} -> ${target}`);
  }
  return out;
}

const files = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );

describe('netpolicy rooms', () => {
  it('every source file is in a room (index.ts alone at the top)', () => {
    const loose = files(SRC)
      .map((f) => relative(SRC, f))
      .filter((f) => !f.includes('/') && f !== 'index.ts');
    expect(loose).toEqual([]);
  });
  it('no import crosses a wall', () => {
    expect(files(SRC).flatMap((f) => crossings(f, readFileSync(f, 'utf8')))).toEqual([]);
  });
  it('the check sees a crossing', () => {
    const f = join(SRC, 'agent/x.ts');
    expect(crossings(f, "import { X } from '../controller/controller.ts';")).toEqual([
      'agent/x.ts -> controller/controller.ts',
    ]);
    expect(crossings(join(SRC, 'engine/x.ts'), "export * from '../cluster/watch.ts';")).toHaveLength(1);
    expect(crossings(join(SRC, 'engine/x.ts'), "const m = await import('../agent/agent.ts');")).toHaveLength(
      1,
    );
    expect(crossings(join(SRC, 'controller/x.ts'), "import { Y } from '../engine/engine.ts';")).toEqual([]);
  });
});
