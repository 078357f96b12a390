// The documents of one input file, as plain values (or a YAML error per document). JSON text (what
// `kubectl get -o json` writes) is read by JSON.parse; large YAML files are parsed once and kept in a
// cache by their content's hash, because the YAML library takes about half a second for a 350 KiB
// cluster snapshot, most of a command's start-up. The cache is the user's own
// ($XDG_CACHE_HOME or ~/.cache, cascade/manifests, at most 32 files), written only for text whose
// values JSON keeps exactly (no .inf or .nan), and any failure to read or write it is ignored.
import { createHash } from 'node:crypto';
import {
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';

export type Doc = { js: unknown } | { error: string };

/** Files at least this long (in characters) are cached. */
export const CACHE_MIN = 64 * 1024;
const CACHE_FILES = 32;

function cacheDir(): string | undefined {
  if (process.env.CASCADECTL_NO_CACHE === '1') return undefined;
  const base = process.env.XDG_CACHE_HOME || (homedir() ? join(homedir(), '.cache') : undefined);
  return base ? join(base, 'cascade', 'manifests') : undefined;
}

function parseYamlDocs(text: string): Doc[] {
  return parseAllDocuments(text).map((doc): Doc => {
    if ('errors' in doc && doc.errors.length > 0) return { error: doc.errors[0]!.message.split('\n')[0]! };
    try {
      return { js: doc.toJS({ maxAliasCount: 100 }) };
    } catch (e) {
      return { error: `${(e as Error).message.split('\n')[0]} (an alias bomb?): skipped` };
    }
  });
}

export function documentsOf(text: string): Doc[] {
  const start = text.trimStart()[0];
  if (start === '{' || start === '[') {
    try {
      return [{ js: JSON.parse(text) }];
    } catch {
      // not JSON after all (YAML flow style, or several documents): the YAML reader says what is wrong
    }
  }
  const dir = text.length >= CACHE_MIN && !/\.(?:inf|nan)\b/i.test(text) ? cacheDir() : undefined;
  if (!dir) return parseYamlDocs(text);
  const file = join(dir, `${createHash('sha256').update(text).digest('hex')}.json`);
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Doc[];
  } catch {}
  const docs = parseYamlDocs(text);
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(docs), { mode: 0o600 });
    renameSync(tmp, file);
    const kept = readdirSync(dir)
      .filter((f) => f.endsWith('.json'))
      .map((f) => ({ f, t: statSync(join(dir, f)).mtimeMs }))
      .sort((a, b) => b.t - a.t);
    for (const { f } of kept.slice(CACHE_FILES)) unlinkSync(join(dir, f));
  } catch {}
  return docs;
}
