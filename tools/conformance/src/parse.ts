// What the suites print, read into one result per test: Ginkgo's JSON report (the Kubernetes e2e) and
// `go test -v` output (network-policy-api's suites).

export interface TestResult {
  name: string;
  result: 'passed' | 'failed' | 'skipped';
  seconds: number;
  /** a skip's reason, or a failure's message (first lines) */
  reason?: string;
  /** a failure caused by this machine, not by Cascade (what shows it) */
  environment?: string;
}

/** Ginkgo's JSON report -> one result per spec (It); a failure in a suite-level node counts too. */
export function parseGinkgo(json: string): TestResult[] {
  type Spec = {
    ContainerHierarchyTexts?: string[] | null;
    LeafNodeText?: string;
    LeafNodeType?: string;
    State?: string;
    RunTime?: number;
    Failure?: { Message?: string };
  };
  const suites = JSON.parse(json) as { SpecReports?: Spec[] | null }[];
  const out: TestResult[] = [];
  for (const s of suites)
    for (const r of s.SpecReports ?? []) {
      const isSpec = r.LeafNodeType === 'It';
      const failed = r.State !== 'passed' && r.State !== 'skipped' && r.State !== 'pending';
      if (!isSpec && !failed) continue;
      const name = [...(r.ContainerHierarchyTexts ?? []), r.LeafNodeText ?? r.LeafNodeType ?? '?']
        .filter(Boolean)
        .join(' ');
      out.push({
        name,
        result: failed ? 'failed' : r.State === 'passed' ? 'passed' : 'skipped',
        seconds: Math.round((r.RunTime ?? 0) / 1e7) / 100,
        ...(failed && r.Failure?.Message ? { reason: firstLines(r.Failure.Message) } : {}),
      });
    }
  return out;
}

/**
 * `go test -v` output -> one result per conformance test (TestConformance/NAME, or
 * TestConformanceProfiles/NAME: v0.3's profile run). A skip carries the
 * line after it; a failure the probes that failed, from the test's log (streamed before the verdict
 * lines), and is marked `environment` when every failed probe is SCTP refused by the kernel ("protocol
 * not supported": no SCTP on this machine), not a verdict of the datapath.
 */
export function parseGoTest(output: string): TestResult[] {
  const lines = output.split('\n');
  const logs = new Map<string, string[]>();
  let current: string | undefined;
  for (const line of lines) {
    const run = /^=== (?:RUN|CONT|NAME)\s+TestConformance(?:Profiles)?(?:\/([^/\s]+))?/.exec(line);
    if (run) {
      // `=== NAME  TestConformance`: the parent's own log (a late line of an earlier test's poll, say),
      // which belongs to no test; a test's lines follow its own name again
      current = run[1];
      if (current && !logs.has(current)) logs.set(current, []);
      continue;
    }
    if (/^--- /.test(line))
      current = undefined; // the verdicts follow
    else if (current) logs.get(current)!.push(line.trim());
  }
  const out: TestResult[] = [];
  lines.forEach((line, i) => {
    const m = /^\s*--- (PASS|FAIL|SKIP): TestConformance(?:Profiles)?\/([^/\s]+) \(([\d.]+)s\)/.exec(line);
    if (!m) return;
    const name = m[2]!;
    const result = m[1] === 'PASS' ? 'passed' : m[1] === 'FAIL' ? 'failed' : 'skipped';
    const t: TestResult = { name, result, seconds: Number(m[3]) };
    if (result === 'skipped') {
      const next = lines[i + 1]?.trim();
      if (next && !next.startsWith('---')) t.reason = next;
    } else if (result === 'failed') {
      const log = logs.get(name) ?? [];
      const failedProbes = log.filter((l) => /FAILED Command was/.test(l));
      const why = log.filter((l) => /FAILED Command was|Expected connection|Error:|error /.test(l));
      t.reason = firstLines((why.length ? why : log.slice(-12)).join('\n'));
      if (
        failedProbes.length > 0 &&
        failedProbes.every((l) => l.includes('--protocol=sctp')) &&
        log.some((l) => l.includes('protocol not supported'))
      )
        t.environment = `every failed probe is SCTP (${failedProbes.length}), refused by this kernel ("protocol not supported"): no SCTP here; its TCP and UDP probes passed`;
    }
    out.push(t);
  });
  return out;
}

export const firstLines = (s: string) => s.split('\n').slice(0, 12).join('\n').slice(0, 2000);
