// One benchmark figure: a value with its unit and the input it was measured on.
export interface Figure {
  suite: string;
  name: string;
  value: number;
  unit: string;
  input: string;
  /** Optional target, as stated in the issue that asked for the figure. */
  target?: string;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return sorted[Math.max(0, i)]!;
}

export function summarize(samples: number[]): { median: number; p99: number; max: number } {
  const s = [...samples].sort((a, b) => a - b);
  return { median: percentile(s, 50), p99: percentile(s, 99), max: s[s.length - 1] ?? Number.NaN };
}

export const ms = (t0: bigint): number => Number(process.hrtime.bigint() - t0) / 1e6;

export function peakRssMiB(): number {
  return process.resourceUsage().maxRSS / 1024;
}
