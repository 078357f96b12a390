// Request predicates (`when: [{predicate: "<CEL>"}]`), the data-plane conditions that the Gateway API
// policy kinds carry through to enforcement. Core checks their syntax; it never evaluates them.
import { z } from 'zod';
import type { SpecIssue } from './kind.ts';
import { compileCondition, isCompiled } from './merge/cel.ts';

export const predicateSchema = z.strictObject({ predicate: z.string().min(1).max(4096) });
export const predicateListSchema = z.array(predicateSchema).max(64);
export type Predicate = z.infer<typeof predicateSchema>;

/** Syntax problems of every `predicate` string anywhere under `spec`, with their field paths. */
export function predicateIssues(spec: unknown, base = 'spec'): SpecIssue[] {
  return celFieldIssues(spec, ['predicate'], base);
}

/**
 * Syntax (and cost) problems of every string under `spec` held by one of the `fields` (a kind's CEL
 * fields: `predicate`, a counter's `expression`), with their field paths. A data plane may place such
 * a string inside a larger expression (wasm-shim's typed message builders): only a whole expression
 * can never reach past its place.
 */
export function celFieldIssues(spec: unknown, fields: readonly string[], base = 'spec'): SpecIssue[] {
  const issues: SpecIssue[] = [];
  const walk = (v: unknown, path: string): void => {
    if (Array.isArray(v)) v.forEach((x, i) => walk(x, `${path}[${i}]`));
    else if (v && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        if (fields.includes(k) && typeof x === 'string') {
          const c = compileCondition(x);
          if (!isCompiled(c)) issues.push({ field: `${path}.${k}`, message: `CEL ${c.error}` });
        } else walk(x, `${path}.${k}`);
      }
    }
  };
  walk(spec, base);
  return issues;
}
