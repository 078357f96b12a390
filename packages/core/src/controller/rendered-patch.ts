// A JSON patch (RFC 6902) from a live rendered object to what the controller renders now, for objects
// so large that a server-side apply of the whole object is most of a change's latency (a gateway's
// data-plane configuration: 500 KB re-sent, parsed and merged for one route's change). It changes
// exactly what renderedEqual compares (rendered.ts): every top-level field but apiVersion, kind and
// metadata; the rendered labels and annotations (and removes cascade.dev/ annotations no longer
// rendered); the owner references. Other writers' labels and annotations are left alone. Its first
// operation tests the live object's resourceVersion, so a patch computed against a stale copy is
// refused, never applied.

import type { RenderedObject } from '../kind.ts';
import type { KubeObject } from '../kube/client.ts';

/** One RFC 6902 operation. */
export interface PatchOp {
  op: 'add' | 'remove' | 'replace' | 'test';
  path: string;
  value?: unknown;
}

const pointer = (k: string) => k.replace(/~/g, '~0').replace(/\//g, '~1');

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Operations that turn `from` into `to` at `path`: objects key by key, arrays of the same length item
 * by item, anything else replaced whole. `to` is JSON data (no undefined).
 */
function diff(from: unknown, to: unknown, path: string, out: PatchOp[]): void {
  if (from === to) return;
  if (isObject(from) && isObject(to)) {
    for (const k of Object.keys(from))
      if (!(k in to)) out.push({ op: 'remove', path: `${path}/${pointer(k)}` });
    for (const [k, v] of Object.entries(to))
      if (!(k in from)) out.push({ op: 'add', path: `${path}/${pointer(k)}`, value: v });
      else diff(from[k], v, `${path}/${pointer(k)}`, out);
    return;
  }
  if (Array.isArray(from) && Array.isArray(to) && from.length === to.length) {
    for (let i = 0; i < to.length; i++) diff(from[i], to[i], `${path}/${i}`, out);
    return;
  }
  out.push({ op: 'replace', path, value: to });
}

interface Meta {
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: { uid: string }[];
}

/** The patch from `live` to `want` (see the header); only the resourceVersion test when they agree. */
export function renderedPatch(liveObject: KubeObject, want: RenderedObject): PatchOp[] {
  // JSON data as it will be sent: undefined values dropped, as the API server would never hold them
  return renderedPatchTo(liveObject, JSON.parse(JSON.stringify(want)) as RenderedObject);
}

/** renderedPatch to a rendered object that is JSON data already (parsed from its serialisation). */
export function renderedPatchTo(liveObject: KubeObject, json: RenderedObject): PatchOp[] {
  const live = liveObject as unknown as Record<string, unknown>;
  const to = json as unknown as Record<string, unknown> & { metadata: Meta };
  const lm = liveObject.metadata as Meta;
  const out: PatchOp[] = [{ op: 'test', path: '/metadata/resourceVersion', value: lm.resourceVersion }];
  for (const [f, v] of Object.entries(to)) {
    if (f === 'apiVersion' || f === 'kind' || f === 'metadata') continue;
    if (!(f in live)) out.push({ op: 'add', path: `/${pointer(f)}`, value: v });
    else diff(live[f], v, `/${pointer(f)}`, out);
  }
  for (const part of ['labels', 'annotations'] as const) {
    const want = to.metadata[part] ?? {};
    const have = lm[part];
    const stale =
      part === 'annotations'
        ? Object.keys(have ?? {}).filter((k) => k.startsWith('cascade.dev/') && !(k in want))
        : [];
    if (!have) {
      if (Object.keys(want).length) out.push({ op: 'add', path: `/metadata/${part}`, value: want });
      continue;
    }
    for (const k of stale) out.push({ op: 'remove', path: `/metadata/${part}/${pointer(k)}` });
    for (const [k, v] of Object.entries(want))
      if (have[k] !== v)
        out.push({ op: k in have ? 'replace' : 'add', path: `/metadata/${part}/${pointer(k)}`, value: v });
  }
  const owners = to.metadata.ownerReferences;
  if (owners) {
    const same =
      (lm.ownerReferences ?? []).map((o) => o.uid).join(',') === owners.map((o) => o.uid).join(',');
    if (!same)
      out.push({
        op: lm.ownerReferences ? 'replace' : 'add',
        path: '/metadata/ownerReferences',
        value: owners,
      });
  }
  return out;
}
