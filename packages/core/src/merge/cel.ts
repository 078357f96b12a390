// D/O conditions: CEL over the lower effective policy (`self`). Parsing happens once per policy
// revision; evaluation errors are returned, never thrown, so they can become status messages.
import { Environment } from '@marcbachmann/cel-js';

const env = new Environment({ unlistedVariablesAreDyn: true });

export interface CompiledCondition {
  source: string;
  /** `rule` is the lower rule `{name, value}` for a wildcard constraint, else null. */
  evaluate(self: unknown, rule?: unknown): { ok: true; value: boolean } | { ok: false; error: string };
}

function firstLine(e: unknown): string {
  const msg = e instanceof Error ? e.message : String(e);
  return msg.split('\n')[0] ?? msg;
}

/** Compiled conditions by source text: many policies repeat the same constraint. Bounded. */
const cache = new Map<string, CompiledCondition | { error: string }>();
const CACHE_MAX = 10_000;

/** Parses a condition (cached by source); returns a message when it does not parse. */
export function compileCondition(source: string): CompiledCondition | { error: string } {
  let c = cache.get(source);
  if (!c) {
    c = compileUncached(source);
    if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value!);
    cache.set(source, c);
  }
  return c;
}

function compileUncached(source: string): CompiledCondition | { error: string } {
  let program: (ctx: Record<string, unknown>) => unknown;
  try {
    program = env.parse(source) as unknown as (ctx: Record<string, unknown>) => unknown;
  } catch (e) {
    return { error: `does not parse: ${firstLine(e)}` };
  }
  return {
    source,
    evaluate(self, rule = null) {
      try {
        const v = program({ self, rule });
        if (typeof v !== 'boolean') return { ok: false, error: `evaluates to ${typeof v}, not bool` };
        return { ok: true, value: v };
      } catch (e) {
        return { ok: false, error: firstLine(e) };
      }
    },
  };
}

export function isCompiled(c: CompiledCondition | { error: string }): c is CompiledCondition {
  return 'evaluate' in c;
}
