// Rates are a limit per window, and windows differ: 5000/h is 83/min, far below 1000/min. A
// constraint compares and clips on the normalised rate (requests per second over the window
// Limitador enforces), never on the raw numbers, and never loosens a limit.
import { mergePatch } from '@cascade/core';

export interface Rate {
  limit: number;
  window: string;
}

/** Window in seconds (Limitador's `seconds`); sub-second windows round up to 1 s. */
export function windowSeconds(window: string): number {
  let ms = 0;
  for (const m of window.matchAll(/([0-9]+)(ms|h|m|s)/g)) {
    const n = Number(m[1]);
    ms += m[2] === 'h' ? n * 3_600_000 : m[2] === 'm' ? n * 60_000 : m[2] === 's' ? n * 1000 : n;
  }
  return Math.max(1, Math.ceil(ms / 1000));
}

/** Requests per second a rate allows in the long run, as Limitador enforces it. */
export function perSecond(r: Rate): number {
  return r.limit / windowSeconds(r.window);
}

function isRate(v: unknown): v is Rate {
  if (!v || typeof v !== 'object') return false;
  const r = v as Record<string, unknown>;
  return (
    (typeof r.limit === 'number' || typeof r.limit === 'bigint') &&
    typeof r.window === 'string' &&
    /^([0-9]{1,5}(h|m|s|ms)){1,4}$/.test(r.window)
  );
}

/**
 * CEL `ratePer(rate, window)`: the rate expressed per another window, e.g. `ratePer(r, '1m')` is 83.3
 * for 5000/1h. Errors (the condition fails, so a constraint applies: fail safe) on anything but a
 * `{limit, window}` map and a duration.
 */
export function ratePer(rate: unknown, window: string): number {
  const r = rate instanceof Map ? Object.fromEntries(rate) : rate;
  if (!isRate(r)) throw new Error('ratePer: the first argument must be a rate {limit, window}');
  if (!/^([0-9]{1,5}(h|m|s|ms)){1,4}$/.test(window))
    throw new Error(`ratePer: "${window}" is not a duration like 1m, 30s or 1h30m`);
  return perSecond({ limit: Number(r.limit), window: r.window }) * windowSeconds(window);
}

/**
 * A constraint's limit applied to a lower limit. Fields other than `rates` are merge-patched. Rates:
 * when one of the lower limit's rates allows more per second than the constraint's tightest rate, the
 * constraint's rates are added; a lower rate with the same window as a constraint rate and a limit
 * no lower is dropped (the constraint's is tighter in that window). The lower limit's other rates
 * stay, so no window gets looser: the result's tightest normalised rate is never above either
 * input's. A limit already within the constraint is returned unchanged.
 */
export function clipLimit(lower: unknown, constraint: unknown): unknown {
  if (!lower || typeof lower !== 'object' || !constraint || typeof constraint !== 'object')
    return mergePatch(lower, constraint);
  const { rates: cRates, ...cRest } = constraint as Record<string, unknown>;
  const lRates = (lower as Record<string, unknown>).rates;
  // the other fields merge-patched, in the lower limit's order; `rates` set below (a constraint
  // without rates, or with `rates: null`, cannot remove the lower limit's)
  const out = mergePatch(lower, cRest) as Record<string, unknown>;
  const low = Array.isArray(lRates) ? lRates.filter(isRate) : [];
  const caps = Array.isArray(cRates) ? cRates.filter(isRate) : [];
  if (caps.length === 0 || low.length === 0) return out;
  const cap = Math.min(...caps.map(perSecond));
  if (!low.some((r) => perSecond(r) > cap)) return out;
  const kept = low.filter(
    (r) => !caps.some((c) => windowSeconds(c.window) === windowSeconds(r.window) && c.limit <= r.limit),
  );
  const added = caps.filter(
    (c) => !kept.some((r) => windowSeconds(r.window) === windowSeconds(c.window) && r.limit <= c.limit),
  );
  out.rates = [...kept, ...added];
  return out;
}
