// Reads Kubernetes YAML files and folders (multi-document, `List` accepted). A malformed document is
// reported with file, document index and problem; the rest is still loaded.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';

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
    generation?: number;
  };
  spec?: unknown;
  status?: unknown;
  source: SourcePos;
}

export interface LoadResult {
  manifests: Manifest[];
  problems: string[];
}

export const where = (s: SourcePos): string => `${s.file}: document ${s.doc}`;

function listFiles(path: string): string[] {
  const st = statSync(path);
  if (!st.isDirectory()) return [path];
  return readdirSync(path)
    .sort()
    .flatMap((e) => {
      const p = join(path, e);
      if (statSync(p).isDirectory()) return listFiles(p);
      return /\.(ya?ml|json)$/.test(e) ? [p] : [];
    });
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
  out.manifests.push({
    apiVersion: typeof o.apiVersion === 'string' ? o.apiVersion : '',
    kind: o.kind,
    metadata,
    spec: o.spec,
    status: o.status,
    source,
  });
}

/** Loads every document of every file (folders recursively, *.yaml / *.yml / *.json, sorted). */
export function loadManifests(paths: string[]): LoadResult {
  const out: LoadResult = { manifests: [], problems: [] };
  for (const p of paths) {
    let files: string[];
    try {
      files = listFiles(p);
    } catch (e) {
      out.problems.push(`${p}: cannot read: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
      continue;
    }
    for (const file of files) {
      let text: string;
      try {
        text = readFileSync(file, 'utf8');
      } catch (e) {
        out.problems.push(`${file}: cannot read: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
        continue;
      }
      parseAllDocuments(text).forEach((doc, i) => {
        const source = { file, doc: i + 1 };
        if ('errors' in doc && doc.errors.length > 0) {
          const e = doc.errors[0]!;
          out.problems.push(`${where(source)}: YAML: ${e.message.split('\n')[0]}`);
          return;
        }
        accept(doc.toJS({ maxAliasCount: 100 }), source, out);
      });
    }
  }
  return out;
}
