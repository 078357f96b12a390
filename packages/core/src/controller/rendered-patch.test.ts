// The JSON patch a large rendered object is updated with: applied to the live object it gives what
// renderedEqual calls equal to the rendered one, leaves other writers' labels and annotations alone,
// and is refused against another resourceVersion.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { RenderedObject } from '../kind.ts';
import type { KubeObject } from '../kube/client.ts';
import { renderedEqual } from './rendered.ts';
import { type PatchOp, renderedPatch } from './rendered-patch.ts';

/** RFC 6902 as the API server applies it (the operations renderedPatch writes). */
function apply(doc: unknown, ops: PatchOp[]): unknown {
  const root = structuredClone(doc) as Record<string, unknown>;
  for (const op of ops) {
    const parts = op.path
      .split('/')
      .slice(1)
      .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
    const last = parts.pop()!;
    let at: Record<string, unknown> | unknown[] = root;
    for (const p of parts) at = (at as Record<string, unknown>)[p] as Record<string, unknown>;
    const target = at as Record<string, unknown>;
    if (op.op === 'test') {
      if (JSON.stringify(target[last]) !== JSON.stringify(op.value))
        throw new Error(`test failed at ${op.path}`);
    } else if (op.op === 'remove') {
      if (!(last in target)) throw new Error(`remove of a missing ${op.path}`);
      if (Array.isArray(target)) target.splice(Number(last), 1);
      else delete target[last];
    } else if (op.op === 'replace') {
      if (!(last in target)) throw new Error(`replace of a missing ${op.path}`);
      target[last] = structuredClone(op.value);
    } else target[last] = structuredClone(op.value);
  }
  return root;
}

const json = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.constantFrom(0, 1, 'a', 'b/c', 'd~e', true, null),
    fc.array(tie('value'), { maxLength: 3 }),
    fc.dictionary(fc.constantFrom('x', 'y', 'a/b', 't~', 'k'), tie('value'), { maxKeys: 3 }),
  ),
})).value;
const strings = fc.dictionary(
  fc.constantFrom('cascade.dev/a', 'cascade.dev/b', 'other.io/c', 'app'),
  fc.constantFrom('1', '2'),
  {
    maxKeys: 3,
  },
);

const object = (spec: unknown, labels: Record<string, string>, annotations: Record<string, string>) => ({
  apiVersion: 'v1',
  kind: 'Thing',
  metadata: { name: 'n', namespace: 'ns', resourceVersion: '7', labels, annotations },
  spec,
});

describe('renderedPatch', () => {
  it('turns the live object into one renderedEqual to the rendered one, leaving other writers alone', () => {
    fc.assert(
      fc.property(json, json, strings, strings, strings, strings, (from, to, ll, la, wl, wa) => {
        const live = object(from, ll, la) as unknown as KubeObject;
        const want = object(to, wl, wa) as unknown as RenderedObject;
        const ops = renderedPatch(live, want);
        const after = apply(live, ops) as KubeObject;
        expect(renderedEqual(after, want)).toBe(true);
        // labels and annotations of other writers stay
        const am = after.metadata as { labels: Record<string, string>; annotations: Record<string, string> };
        for (const [k, v] of Object.entries(ll)) if (!(k in wl)) expect(am.labels[k]).toBe(v);
        for (const [k, v] of Object.entries(la))
          if (!(k in wa) && !k.startsWith('cascade.dev/')) expect(am.annotations[k]).toBe(v);
        // equal objects: only the version test, and only they (the publisher skips a large object
        // whose patch is the version test alone, instead of comparing it again)
        expect(ops.length === 1).toBe(renderedEqual(live, want));
      }),
      { numRuns: 2000 },
    );
  });

  it('a changed item of a long list is one small operation, not the list', () => {
    const sets = (k: number) =>
      Array.from({ length: 600 }, (_, i) => ({ name: `s${i}`, p: i === 17 ? `v${k}` : 'x' }));
    const live = object({ actionSets: sets(1) }, {}, {}) as unknown as KubeObject;
    const ops = renderedPatch(live, object({ actionSets: sets(2) }, {}, {}) as unknown as RenderedObject);
    expect(ops).toEqual([
      { op: 'test', path: '/metadata/resourceVersion', value: '7' },
      { op: 'replace', path: '/spec/actionSets/17/p', value: 'v2' },
    ]);
  });

  it('starts with a test of the resourceVersion: a patch against a stale copy is refused', () => {
    const live = object({ a: 1 }, {}, {});
    const ops = renderedPatch(
      live as unknown as KubeObject,
      object({ a: 2 }, {}, {}) as unknown as RenderedObject,
    );
    expect(() => apply({ ...live, metadata: { ...live.metadata, resourceVersion: '8' } }, ops)).toThrow(
      /test failed/,
    );
  });
});
