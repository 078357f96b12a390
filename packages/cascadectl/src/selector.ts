// kubectl's -l/--selector: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, joined
// by commas (all must hold). Parsed into a LabelSelector and matched by core's matchesSelector, so
// a `!=` or `notin` also selects objects without the key, as in Kubernetes.
import { type LabelSelector, matchesSelector } from '@cascade/core';
import { UsageError } from './cli.ts';
import type { Manifest } from './load.ts';

const KEY = /^([a-z0-9A-Z.-]{1,253}\/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?$/;
const VALUE = /^$|^[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?$/;

/** Splits on commas outside parentheses. */
function requirements(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let cur = '';
  for (const c of text) {
    if (c === '(') depth++;
    if (c === ')') depth--;
    if (c === ',' && depth === 0) {
      parts.push(cur);
      cur = '';
    } else cur += c;
  }
  parts.push(cur);
  return parts.map((p) => p.trim());
}

/** The selector a -l text means; a UsageError naming the requirement that is not one. */
export function parseSelector(text: string): LabelSelector {
  const sel: Required<LabelSelector> = { matchLabels: {}, matchExpressions: [] };
  const bad = (r: string, why: string) => new UsageError(`-l "${text}": "${r}" ${why}`);
  const key = (r: string, k: string) => {
    if (!KEY.test(k)) throw bad(r, `has an invalid label key "${k}"`);
    return k;
  };
  const value = (r: string, v: string) => {
    if (!VALUE.test(v)) throw bad(r, `has an invalid label value "${v}"`);
    return v;
  };
  if (text.length > 4096) throw new UsageError('-l: a selector of more than 4,096 characters');
  for (const r of requirements(text)) {
    if (r === '') throw bad(r, 'is empty (a stray comma?)');
    let m = /^(!)\s*(\S+)$/.exec(r);
    if (m) {
      sel.matchExpressions.push({ key: key(r, m[2]!), operator: 'DoesNotExist' });
      continue;
    }
    m = /^(\S+?)\s+(in|notin)\s*\((.*)\)$/.exec(r);
    if (m) {
      const values = m[3]!.split(',').map((v) => value(r, v.trim()));
      sel.matchExpressions.push({ key: key(r, m[1]!), operator: m[2] === 'in' ? 'In' : 'NotIn', values });
      continue;
    }
    m = /^([^=!\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(r);
    if (m) {
      const k = key(r, m[1]!);
      const v = value(r, m[3]!);
      if (m[2] === '!=') sel.matchExpressions.push({ key: k, operator: 'NotIn', values: [v] });
      else if (k in sel.matchLabels && sel.matchLabels[k] !== v)
        sel.matchExpressions.push({ key: k, operator: 'In', values: [v] });
      else sel.matchLabels[k] = v;
      continue;
    }
    if (/^\S+$/.test(r)) {
      sel.matchExpressions.push({ key: key(r, r), operator: 'Exists' });
      continue;
    }
    throw bad(r, 'is not a requirement (k=v, k!=v, k in (a,b), k notin (a,b), k, !k)');
  }
  return sel;
}

/** A label test from the -l option (everything when absent). */
export function labelTest(
  option: unknown,
): (labels: Readonly<Record<string, string>> | undefined) => boolean {
  if (option === undefined) return () => true;
  const sel = parseSelector(String(option));
  return (labels) => matchesSelector(sel, labels ?? {});
}

/** Labels of loaded objects by `Kind ns/name` (cluster-scoped: `Kind name`). */
export function labelIndex(
  manifests: readonly Manifest[],
): (kind: string, ns: string | undefined, name: string) => Record<string, string> {
  const by = new Map<string, Record<string, string>>();
  for (const m of manifests)
    by.set(
      `${m.kind} ${m.metadata.namespace ? `${m.metadata.namespace}/` : ''}${m.metadata.name}`,
      m.metadata.labels ?? {},
    );
  return (kind, ns, name) => by.get(`${kind} ${ns ? `${ns}/` : ''}${name}`) ?? {};
}

export const selectorOption = { selector: { type: 'string' as const, short: 'l' } };

/** kubectl's -n/--namespace and -A/--all-namespaces. */
export const namespaceOptions = {
  namespace: { type: 'string' as const, short: 'n' },
  'all-namespaces': { type: 'boolean' as const, short: 'A' },
};

/** The namespace -n names (undefined: every namespace, also with -A). */
export const namespaceOf = (values: Record<string, unknown>): string | undefined =>
  values['all-namespaces'] ? undefined : (values.namespace as string | undefined);
