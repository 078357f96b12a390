// Field paths of CRD schemas, for tests that compare the project's zod schemas with the upstream CRDs
// the set-up step takes from the pinned Go modules.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { envtestPaths } from './envtest.ts';

export type SchemaNode = { properties?: Record<string, SchemaNode>; items?: SchemaNode; required?: string[] };

/** Every field path below a schema node: `spec.a`, `spec.a.b`, `spec.list[].c`. */
export function schemaPaths(s: SchemaNode | undefined, base = 'spec', out = new Set<string>()): Set<string> {
  if (!s) return out;
  for (const [k, v] of Object.entries(s.properties ?? {})) {
    const p = `${base}.${k}`;
    out.add(p);
    schemaPaths(v, p, out);
  }
  if (s.items) schemaPaths(s.items, `${base}[]`, out);
  return out;
}

/** The required field paths below a schema node (a field whose parent requires it): `spec.a.b`. */
export function requiredPaths(
  s: SchemaNode | undefined,
  base = 'spec',
  out = new Set<string>(),
): Set<string> {
  if (!s) return out;
  for (const k of s.required ?? []) out.add(`${base}.${k}`);
  for (const [k, v] of Object.entries(s.properties ?? {})) requiredPaths(v, `${base}.${k}`, out);
  if (s.items) requiredPaths(s.items, `${base}[]`, out);
  return out;
}

/** The required spec field paths of an upstream CRD file (its first version, or the named one). */
export function upstreamSpecRequired(file: string, version?: string): Set<string> {
  return requiredPaths(upstreamSpec(file, version));
}

/** The spec field paths of an upstream CRD file (its first version, or the named one). */
export function upstreamSpecPaths(file: string, version?: string): Set<string> {
  return schemaPaths(upstreamSpec(file, version));
}

function upstreamSpec(file: string, version?: string): SchemaNode {
  const crd = parse(readFileSync(join(envtestPaths()!.crds, file), 'utf8')) as {
    spec: { versions: { name: string; schema: { openAPIV3Schema: { properties: { spec: SchemaNode } } } }[] };
  };
  const v = version ? crd.spec.versions.find((x) => x.name === version) : crd.spec.versions[0];
  if (!v) throw new Error(`${file}: no version ${version}`);
  return v.schema.openAPIV3Schema.properties.spec;
}
