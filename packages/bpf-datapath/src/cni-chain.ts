// cascade-cni's place in the node's CNI configuration: chained after the main plugin of the
// configuration the runtime uses (the first .conflist of the directory in lexical order, as containerd
// and CRI-O pick it) at install, and taken out of every .conflist at uninstall, so a node without
// Cascade gives new pods plain networking (the plugin left in would fail their ADD closed).
// Each file is rewritten atomically (a temporary file renamed over it); other plugins and fields are
// kept as they were.
import { readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** What cascade-cni is told in the chain (bpf-datapath README: the CNI chaining plugin). */
export interface ChainEntry {
  pinDir: string;
  recordDir: string;
  /** Cascade's release namespace: its pods get no program at ADD (they reach the API server first). */
  exemptNamespace?: string;
}

type Conflist = { plugins?: unknown[]; [field: string]: unknown };
const isCascade = (p: unknown) => (p as { type?: unknown } | null)?.type === 'cascade-cni';

function parse(file: string, text: string): Conflist {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new Error(`${file}: not JSON (${(e as Error).message})`);
  }
  if (typeof v !== 'object' || v === null || !Array.isArray((v as Conflist).plugins))
    throw new Error(`${file}: not a CNI conflist (no plugins list)`);
  return v as Conflist;
}

/** The conflist's text with cascade-cni last in its plugins, configured as `entry` (replacing an older one). */
export function chained(file: string, text: string, entry: ChainEntry): string {
  const c = parse(file, text);
  const plugins = c.plugins!.filter((p) => !isCascade(p));
  if (!plugins.length) throw new Error(`${file}: no main plugin to chain after`);
  plugins.push({ type: 'cascade-cni', ...entry });
  return `${JSON.stringify({ ...c, plugins }, null, 2)}\n`;
}

/** The conflist's text without cascade-cni (undefined: it was not there). */
export function unchained(file: string, text: string): string | undefined {
  const c = parse(file, text);
  if (!c.plugins!.some(isCascade)) return undefined;
  return `${JSON.stringify({ ...c, plugins: c.plugins!.filter((p) => !isCascade(p)) }, null, 2)}\n`;
}

/** Whether a .conflist of `dir` chains cascade-cni (an unreadable directory or file counts as not). */
export function cniChained(dir: string): boolean {
  try {
    return conflists(dir).some((f) => {
      try {
        return parse(f, readFileSync(join(dir, f), 'utf8')).plugins!.some(isCascade);
      } catch {
        return false;
      }
    });
  } catch {
    return false;
  }
}

const conflists = (dir: string) =>
  readdirSync(dir)
    .filter((f) => f.endsWith('.conflist'))
    .sort();

function replace(path: string, text: string): void {
  const tmp = join(path, '..', `.cascade-cni.${process.pid}.tmp`);
  writeFileSync(tmp, text, { mode: 0o644 });
  renameSync(tmp, path);
}

/**
 * Chains cascade-cni into the configuration the runtime uses: the first .conflist of `dir`
 * (a .conf before it, a single plugin, cannot be chained into: an error says so). Returns its path.
 */
export function chainCni(dir: string, entry: ChainEntry): string {
  const all = readdirSync(dir)
    .filter((f) => /\.(conf|conflist|json)$/.test(f))
    .sort();
  const first = all[0];
  if (!first)
    throw new Error(`${dir}: no CNI configuration to chain cascade-cni into (the main CNI writes one first)`);
  if (!first.endsWith('.conflist'))
    throw new Error(
      `${join(dir, first)}: the runtime uses this single-plugin configuration; cascade-cni chains only into a .conflist (convert it, or chain by hand: bpf-datapath README)`,
    );
  const path = join(dir, first);
  const before = readFileSync(path, 'utf8');
  const after = chained(path, before, entry);
  if (after !== before) replace(path, after);
  return path;
}

/** Takes cascade-cni out of every .conflist of `dir`; returns the files changed. A bad file is skipped and named. */
export function unchainCni(dir: string): { changed: string[]; failed: string[] } {
  const changed: string[] = [];
  const failed: string[] = [];
  let files: string[];
  try {
    files = conflists(dir);
  } catch (e) {
    return { changed, failed: [`${dir}: ${(e as Error).message}`] };
  }
  for (const f of files) {
    const path = join(dir, f);
    try {
      const after = unchained(path, readFileSync(path, 'utf8'));
      if (after === undefined) continue;
      replace(path, after);
      changed.push(path);
    } catch (e) {
      const m = (e as Error).message;
      failed.push(m.startsWith(path) ? m : `${path}: ${m}`);
    }
  }
  return { changed, failed };
}
