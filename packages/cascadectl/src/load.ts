// Reads Kubernetes YAML files and folders (multi-document, `List` accepted). A malformed document is
// reported with file, document index and problem; the rest is still loaded. Hostile input never
// hangs or loses the rest: only regular files are read (a FIFO or device is reported, not opened),
// symlink loops and links back to a folder already read are reported, a YAML alias bomb is refused
// (at most 100 aliases per document), and an object defined twice is reported (the first is kept).
// With a live cluster (--kubeconfig), a file's object replaces the cluster's of the same identity.
import { readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { documentsOf } from './documents.ts';

export interface SourcePos {
  file: string;
  /** 1-based document index in the file. */
  doc: number;
}

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    creationTimestamp?: string;
    /** Set on an object being deleted (a pod without an address then is leaving, not broken). */
    deletionTimestamp?: string;
    generation?: number;
  };
  spec?: unknown;
  status?: unknown;
  /** Top-level fields of kinds without a spec (EndpointSlice: addressType, endpoints, ports). */
  body?: Record<string, unknown>;
  source: SourcePos;
}

/** The top-level fields kept for kinds that have no spec. */
export function bodyOf(kind: string, o: Record<string, unknown>): Pick<Manifest, 'body'> {
  if (kind !== 'EndpointSlice') return {};
  return { body: { addressType: o.addressType, endpoints: o.endpoints, ports: o.ports } };
}

export interface LoadResult {
  manifests: Manifest[];
  problems: string[];
}

export const where = (s: SourcePos): string => `${s.file}: document ${s.doc}`;

/** Regular files under `path` (folders recursively, sorted); problems for everything else. */
function listFiles(path: string, problems: string[], seen = new Set<string>(), top = true): string[] {
  let st: ReturnType<typeof statSync>;
  let real: string;
  try {
    st = statSync(path);
    real = realpathSync(path);
  } catch (e) {
    problems.push(`${path}: cannot read: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
    return [];
  }
  if (st.isDirectory()) {
    if (seen.has(real)) {
      problems.push(`${path}: a link back to a folder already read (${real}): skipped`);
      return [];
    }
    seen.add(real);
    let entries: string[];
    try {
      entries = readdirSync(path).sort();
    } catch (e) {
      problems.push(`${path}: cannot read: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
      return [];
    }
    return entries.flatMap((e) => {
      const p = join(path, e);
      let isDir = false;
      try {
        isDir = statSync(p).isDirectory();
      } catch {
        // a dangling link or a link loop: reported by the recursive call only if it would be read
        if (!/\.(ya?ml|json)$/.test(e)) return [];
      }
      if (!isDir && !/\.(ya?ml|json)$/.test(e)) return [];
      return listFiles(p, problems, seen, false);
    });
  }
  if (!st.isFile()) {
    problems.push(`${path}: not a regular file (a FIFO, socket or device is never opened): skipped`);
    return [];
  }
  if (!top && !/\.(ya?ml|json)$/.test(path)) return [];
  return [path];
}

function accept(raw: unknown, source: SourcePos, out: LoadResult, inList = false): void {
  if (raw === null || raw === undefined) return;
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    out.problems.push(
      `${where(source)}: not a Kubernetes object (got ${Array.isArray(raw) ? 'a list' : typeof raw})`,
    );
    return;
  }
  const o = raw as Record<string, unknown>;
  if (typeof o.kind !== 'string' || o.kind === '') {
    out.problems.push(`${where(source)}: kind: required`);
    return;
  }
  if (o.kind === 'List' || (o.kind.endsWith('List') && Array.isArray(o.items))) {
    if (inList) {
      out.problems.push(`${where(source)}: nested List is not supported`);
      return;
    }
    if (!Array.isArray(o.items)) {
      out.problems.push(`${where(source)} (List): items: required, must be a list`);
      return;
    }
    for (const item of o.items) accept(item, source, out, true);
    return;
  }
  const md = o.metadata as Record<string, unknown> | undefined;
  if (!md || typeof md !== 'object' || typeof md.name !== 'string' || md.name === '') {
    out.problems.push(`${where(source)} (${o.kind}): metadata.name: required`);
    return;
  }
  if (md.namespace !== undefined && typeof md.namespace !== 'string') {
    out.problems.push(`${where(source)} (${o.kind} ${md.name}): metadata.namespace: must be a string`);
    return;
  }
  const ts = md.creationTimestamp;
  const metadata: Manifest['metadata'] = { name: md.name };
  if (typeof md.namespace === 'string') metadata.namespace = md.namespace;
  if (md.labels && typeof md.labels === 'object') metadata.labels = md.labels as Record<string, string>;
  if (ts instanceof Date) metadata.creationTimestamp = ts.toISOString();
  else if (typeof ts === 'string') metadata.creationTimestamp = ts;
  if (typeof md.generation === 'number') metadata.generation = md.generation;
  const gone = md.deletionTimestamp;
  if (gone instanceof Date) metadata.deletionTimestamp = gone.toISOString();
  else if (typeof gone === 'string') metadata.deletionTimestamp = gone;
  out.manifests.push({
    apiVersion: typeof o.apiVersion === 'string' ? o.apiVersion : '',
    kind: o.kind,
    metadata,
    spec: o.spec,
    status: o.status,
    ...bodyOf(o.kind, o),
    source,
  });
}

/** Objects read from a live cluster (`--kubeconfig` / `--context`), loaded before any file's. */
let cluster: LoadResult | undefined;
export function useClusterObjects(r: LoadResult | undefined): void {
  cluster = r;
}
/** Whether a command has anything to read: files, or a cluster. */
export const hasInput = (paths: readonly string[]): boolean => paths.length > 0 || cluster !== undefined;

/** Loads every document of every file (folders recursively, *.yaml / *.yml / *.json, sorted). */
export function loadManifests(paths: string[]): LoadResult {
  const out: LoadResult = {
    manifests: [...(cluster?.manifests ?? [])],
    problems: [...(cluster?.problems ?? [])],
  };
  const seen = new Set<string>();
  for (const p of paths) {
    // `-`: the documents on standard input (read once)
    const files = p === '-' ? ['-'] : listFiles(p, out.problems, seen);
    for (const file of files) {
      let text: string;
      try {
        text = file === '-' ? readFileSync(0, 'utf8') : readFileSync(file, 'utf8');
      } catch (e) {
        out.problems.push(`${file}: cannot read: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
        continue;
      }
      documentsOf(text).forEach((doc, i) => {
        const source = { file, doc: i + 1 };
        if ('error' in doc) out.problems.push(`${where(source)}: YAML: ${doc.error}`);
        else accept(doc.js, source, out);
      });
    }
  }
  const keyOf = (m: Manifest) =>
    `${m.apiVersion.includes('/') ? m.apiVersion.split('/')[0] : ''}/${m.kind}/${m.metadata.namespace ?? ''}/${m.metadata.name}`;
  // a file's object replaces the live cluster's object of the same identity, as `kubectl apply` would
  // make it: `diff --kubeconfig --after FILE` and `effective --kubeconfig -f FILE` answer "what if"
  // (keeping the live creation time, which orders policies, when the file has none)
  const live = new Map((cluster?.manifests ?? []).map((m) => [keyOf(m), m]));
  if (live.size) {
    const replaced = new Set<Manifest>();
    for (const m of out.manifests) {
      const was = live.get(keyOf(m));
      if (!was || was === m) continue;
      replaced.add(was);
      if (!m.metadata.creationTimestamp && was.metadata.creationTimestamp)
        m.metadata.creationTimestamp = was.metadata.creationTimestamp;
    }
    out.manifests = out.manifests.filter((m) => !replaced.has(m));
  }
  // the same object twice in the files: reported, never silently replaced (the first is kept)
  const first = new Map<string, Manifest>();
  out.manifests = out.manifests.filter((m) => {
    const k = keyOf(m);
    const had = first.get(k);
    if (!had) {
      first.set(k, m);
      return true;
    }
    out.problems.push(
      `${where(m.source)} (${m.kind} ${m.metadata.namespace ? `${m.metadata.namespace}/` : ''}${m.metadata.name}): defined again (first at ${where(had.source)}): this one is ignored`,
    );
    return false;
  });
  return out;
}
