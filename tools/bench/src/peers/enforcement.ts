// Reading enforcement off live traffic: `cascade-probe watch` prints one `TARGET START_MS A|D|R` line
// per connection attempt. A change written at W that expects verdict V of a (client, target) pair is
// enforced for that pair at the start of the first attempt after which every attempt of the pair,
// until the next change, got V; for the change, at the latest pair's moment. Pure functions.

export type Verdict = 'A' | 'D' | 'R';
export interface Attempt {
  pair: string;
  start: number;
  verdict: Verdict;
}

/** Parses watch output of one client (pairs named `${client}>${target index}`); ignores other lines. */
export function parseWatch(client: string, text: string): Attempt[] {
  const out: Attempt[] = [];
  for (const line of text.split('\n')) {
    const m = /^(\d) (\d{10,16}) ([ADR])$/.exec(line.trim());
    if (m) out.push({ pair: `${client}>${m[1]}`, start: Number(m[2]), verdict: m[3] as Verdict });
  }
  return out;
}

const allowed = (v: Verdict) => v === 'A';

/**
 * For the change written at `written` (until `next`, the following change's write), each pair's
 * enforcement moment minus `written` in ms; undefined for a pair whose last attempt in the window
 * still had the old verdict (or that made none). `expectAllow`: the verdict the change asks for.
 */
export function enforcedAfter(
  attempts: Attempt[],
  pairs: string[],
  written: number,
  next: number,
  expectAllow: boolean,
): Map<string, number | undefined> {
  const out = new Map<string, number | undefined>();
  for (const pair of pairs) {
    const inWindow = attempts
      .filter((a) => a.pair === pair && a.start >= written && a.start < next)
      .sort((a, b) => a.start - b.start);
    let firstRight: number | undefined;
    for (const a of inWindow) {
      if (allowed(a.verdict) === expectAllow) firstRight ??= a.start;
      else firstRight = undefined;
    }
    out.set(pair, firstRight === undefined ? undefined : firstRight - written);
  }
  return out;
}

/** True when each pair's last `k` decided attempts since `written` all have the expected verdict. */
export function settled(
  attempts: Attempt[],
  pairs: string[],
  written: number,
  expectAllow: boolean,
  k = 3,
): boolean {
  return pairs.every((pair) => {
    const tail = attempts
      .filter((a) => a.pair === pair && a.start >= written)
      .sort((a, b) => a.start - b.start)
      .slice(-k);
    return tail.length === k && tail.every((a) => allowed(a.verdict) === expectAllow);
  });
}

/**
 * A new pod's first packets to one target: how many got the wrong verdict before the right one held,
 * and the ms from its first attempt to that moment (undefined: the right verdict never held).
 */
export function firstVerdict(
  attempts: Attempt[],
  pair: string,
  expectAllow: boolean,
): { wrong: number; toRightMs: number | undefined; attempts: number } {
  const mine = attempts.filter((a) => a.pair === pair).sort((a, b) => a.start - b.start);
  const rightFrom = enforcedAfter(
    mine,
    [pair],
    mine[0]?.start ?? 0,
    Number.POSITIVE_INFINITY,
    expectAllow,
  ).get(pair);
  const wrong = mine.filter((a) => allowed(a.verdict) !== expectAllow).length;
  return { wrong, toRightMs: rightFrom, attempts: mine.length };
}

/**
 * Each change's moment of enforcement on every pair (the latest pair's), in write order; undefined
 * for a change not enforced on every pair within `limitMs`, and for one whose previous change was
 * not enforced: the traffic never showed the old verdict, so it cannot show the switch (with nothing
 * enforced, every "allow" would otherwise look enforced at once). The verdict before the first write
 * is the caller's to have checked.
 */
export function changeLatencies(
  attempts: Attempt[],
  pairs: string[],
  writes: { at: number; allow: boolean }[],
  limitMs: number,
): (number | undefined)[] {
  const out: (number | undefined)[] = [];
  for (const [k, w] of writes.entries()) {
    const next = writes[k + 1]?.at ?? Number.POSITIVE_INFINITY;
    const vals = [...enforcedAfter(attempts, pairs, w.at, next, w.allow).values()];
    const held = (k === 0 || out[k - 1] !== undefined) && vals.every((v) => v !== undefined && v <= limitMs);
    out.push(held ? Math.max(...(vals as number[])) : undefined);
  }
  return out;
}
