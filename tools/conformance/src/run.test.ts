// The result parsers, on output in the shapes the suites write (ginkgo's JSON report, go test -v).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DEFS,
  defFor,
  mergeParts,
  parseGinkgo,
  parseGoTest,
  ROOT,
  SUBSET_SUITES,
  type SuiteResults,
} from './run.ts';

describe('conformance result parsing', () => {
  it('ginkgo JSON: one result per spec, suite-level failures kept, setup nodes that passed dropped', () => {
    const report = JSON.stringify([
      {
        SpecReports: [
          { LeafNodeType: 'SynchronizedBeforeSuite', State: 'passed', RunTime: 1e9 },
          {
            ContainerHierarchyTexts: ['[sig-network] Netpol', 'NetworkPolicy between server and client'],
            LeafNodeText: "should support a 'default-deny-ingress' policy",
            LeafNodeType: 'It',
            State: 'passed',
            RunTime: 17_743_000_000,
          },
          {
            ContainerHierarchyTexts: ['[sig-network] Netpol'],
            LeafNodeText: 'should enforce updated policy',
            LeafNodeType: 'It',
            State: 'failed',
            RunTime: 2e9,
            Failure: { Message: 'Expected allowed pod connection was instead BLOCKED\nmore' },
          },
          {
            ContainerHierarchyTexts: ['X'],
            LeafNodeText: 'sctp',
            LeafNodeType: 'It',
            State: 'skipped',
            RunTime: 0,
          },
          { LeafNodeType: 'AfterSuite', State: 'failed', Failure: { Message: 'cleanup failed' } },
        ],
      },
    ]);
    expect(parseGinkgo(report)).toEqual([
      {
        name: "[sig-network] Netpol NetworkPolicy between server and client should support a 'default-deny-ingress' policy",
        result: 'passed',
        seconds: 17.74,
      },
      {
        name: '[sig-network] Netpol should enforce updated policy',
        result: 'failed',
        seconds: 2,
        reason: 'Expected allowed pod connection was instead BLOCKED\nmore',
      },
      { name: 'X sctp', result: 'skipped', seconds: 0 },
      { name: 'AfterSuite', result: 'failed', seconds: 0, reason: 'cleanup failed' },
    ]);
  });

  it('go test -v: one result per conformance test; skip reasons; failures with their probes, SCTP-only ones marked as this machine', () => {
    const out = [
      '=== RUN   TestConformance',
      '=== RUN   TestConformance/AdminNetworkPolicyIngressTCP',
      '=== RUN   TestConformance/AdminNetworkPolicyIngressTCP/Should_support_an_allow-ingress-tcp_policy',
      '=== RUN   TestConformance/AdminNetworkPolicyGress',
      '    gress-rules.go:70: FAILED Command was [/agnhost connect --timeout=3s --protocol=sctp 10.244.0.216:9003]',
      '    gress-rules.go:70: Expected connection to succeed from a/b to 10.244.0.216, but instead it miserably failed. stderr: OTHER: protocol not supported',
      '=== RUN   TestConformance/AdminNetworkPolicyEgressTCP',
      // a late line of another test, logged on the parent: not this test's
      '=== NAME  TestConformance',
      '    helper.go:106: FAILED Command was [/agnhost connect --timeout=3s --protocol=tcp 10.250.0.12:34346]',
      '=== NAME  TestConformance/AdminNetworkPolicyEgressTCP',
      '    egress.go:60: FAILED Command was [/agnhost connect --timeout=3s --protocol=tcp 10.244.0.3:80]',
      '    egress.go:60: Expected connection to succeed from a/b to 10.244.0.3, but instead it miserably failed. stderr: TIMEOUT',
      '--- FAIL: TestConformance (52.50s)',
      '    --- PASS: TestConformance/AdminNetworkPolicyIngressTCP (12.50s)',
      '        --- PASS: TestConformance/AdminNetworkPolicyIngressTCP/Should_support_an_allow-ingress-tcp_policy (3.10s)',
      '    --- SKIP: TestConformance/AdminNetworkPolicyEgressNodePeers (0.00s)',
      '        suite.go:178: Skipping AdminNetworkPolicyEgressNodePeers: suite does not support AdminNetworkPolicyEgressNodePeers',
      '    --- FAIL: TestConformance/AdminNetworkPolicyGress (40.00s)',
      '    --- FAIL: TestConformance/AdminNetworkPolicyEgressTCP (12.00s)',
    ].join('\n');
    const r = parseGoTest(out);
    expect(r.map((t) => [t.name, t.result, t.seconds, Boolean(t.environment)])).toEqual([
      ['AdminNetworkPolicyIngressTCP', 'passed', 12.5, false],
      ['AdminNetworkPolicyEgressNodePeers', 'skipped', 0, false],
      ['AdminNetworkPolicyGress', 'failed', 40, true],
      ['AdminNetworkPolicyEgressTCP', 'failed', 12, false],
    ]);
    expect(r[1]!.reason).toMatch(/suite does not support AdminNetworkPolicyEgressNodePeers/);
    expect(r[3]!.reason).toMatch(/protocol=tcp 10.244.0.3:80[\s\S]*TIMEOUT/);
    expect(r[3]!.reason).not.toContain('10.250.0.12');
  });
});

describe('network-policy-api v0.3 as its conformance profile', () => {
  it('go test -v of TestConformanceProfiles: the same results per test', () => {
    const out = [
      '=== RUN   TestConformanceProfiles',
      '=== RUN   TestConformanceProfiles/CNPAdminTierPodSelector',
      '=== RUN   TestConformanceProfiles/CNPBaselineTierEgressNodePeers',
      '--- PASS: TestConformanceProfiles (30.00s)',
      '    --- PASS: TestConformanceProfiles/CNPAdminTierPodSelector (20.25s)',
      '    --- SKIP: TestConformanceProfiles/CNPBaselineTierEgressNodePeers (0.00s)',
      '        suite.go:180: Skipping: ClusterNetworkPolicyEgressNodePeers not supported',
    ].join('\n');
    expect(parseGoTest(out).map((t) => [t.name, t.result, t.seconds])).toEqual([
      ['CNPAdminTierPodSelector', 'passed', 20.25],
      ['CNPBaselineTierEgressNodePeers', 'skipped', 0],
    ]);
  });

  it('declares the experimental features it supports (the standard ones implied), who Cascade is, and where the report goes; node peers on two or more nodes only', () => {
    const one = DEFS['npapi-v0.3'].args('/bin', '/r.yaml', false, DEFS['npapi-v0.3']);
    expect(one).toEqual(
      expect.arrayContaining([
        '-test.run=^TestConformanceProfiles$',
        '-conformance-profiles=ClusterNetworkPolicy',
        '-supported-features=ClusterNetworkPolicyNamedPorts',
        '-project=cascade',
        '-report-output=/r.yaml',
      ]),
    );
    expect(one.some((a) => a.startsWith('-test.skip'))).toBe(false); // SCTP runs: the report counts it
    expect(one.find((a) => a.startsWith('-version='))).toMatch(/^-version=v\d+\.\d+\.\d+\+\w+$/);
    const three = defFor('npapi-v0.3', 3);
    expect(three.args('/bin', '/r.yaml', false, three)).toContain(
      '-supported-features=ClusterNetworkPolicyNamedPorts,ClusterNetworkPolicyEgressNodePeers',
    );
    const sub = DEFS['npapi-v0.3'].args('/bin', '/r.yaml', true, DEFS['npapi-v0.3']);
    expect(sub).toContain(
      '-test.run=^TestConformanceProfiles$/^(CNPAdminTierPodSelector|CNPBaselineTierEgressNamedPort)$',
    );
  });
});

describe("npm test's subsets", () => {
  it("the set-up builds in the background exactly the binaries npm test's subsets run (and their workload, agnhost)", () => {
    const step = readFileSync(join(ROOT, 'scripts/setup.d/50-conformance.sh'), 'utf8');
    const built = /^subset=\(([^)]*)\)$/m.exec(step)?.[1]?.split(/\s+/).filter(Boolean) ?? [];
    expect(built.sort()).toEqual([...SUBSET_SUITES.map((s) => DEFS[s].binary), 'agnhost'].sort());
  });
  it('the NetworkPolicy e2e focus selects the four intended tests of the committed full run, none of them skipped (a renamed upstream test would silently drop out)', () => {
    const args = DEFS.netpol.args('/bin', '/report.json', true, DEFS.netpol);
    const focus = args.find((a) => a.startsWith('--ginkgo.focus='))!.slice('--ginkgo.focus='.length);
    const full = JSON.parse(
      readFileSync(join(ROOT, 'conformance/results/netpol.json'), 'utf8'),
    ) as SuiteResults;
    const picked = full.tests.filter((t) => new RegExp(focus).test(t.name));
    expect(picked.map((t) => t.result)).toEqual(['passed', 'passed', 'passed', 'passed']);
    expect(picked.some((t) => t.name.includes('using UDP'))).toBe(true);
    expect(
      DEFS.netpol
        .args('/bin', '/report.json', false, DEFS.netpol)
        .some((a) => a.startsWith('--ginkgo.focus')),
    ).toBe(false);
  });

  it('side by side: the parts of the NetworkPolicy focus split the subset, and their results merge into one with each test as the part that ran it', () => {
    const focusOf = (tests: string[]) =>
      DEFS.netpol
        .args('/bin', '/r.json', true, { ...DEFS.netpol, subsetTests: tests })
        .find((a) => a.startsWith('--ginkgo.focus='))!;
    const all = DEFS.netpol.subsetTests!;
    const parts = [0, 1].map((i) => all.filter((_, j) => j % 2 === i));
    expect(parts.flat().sort()).toEqual([...all].sort());
    expect(parts.every((p) => p.length === 2)).toBe(true);
    const result = (part: string[], seconds: number): SuiteResults => ({
      suite: 'netpol',
      title: 't',
      module: 'm',
      version: 'v',
      kubernetes: 'v',
      cascadeCommit: 'c',
      date: 'd',
      subset: true,
      nodes: 1,
      command: ['netpol.test', focusOf(part)],
      passed: 2,
      failed: 0,
      failedByEnvironment: 0,
      skipped: 2,
      seconds,
      adaptations: [],
      tests: all.map((name) => ({
        name,
        result: part.includes(name) ? (name === all[1] ? 'failed' : 'passed') : 'skipped',
        seconds: 1,
      })),
    });
    const merged = mergeParts([result(parts[0]!, 200), result(parts[1]!, 230)]);
    expect(merged.tests.map((t) => t.result).sort()).toEqual(['failed', 'passed', 'passed', 'passed']);
    expect([merged.passed, merged.failed, merged.skipped, merged.seconds]).toEqual([3, 1, 0, 230]);
    expect(merged.command[1]).toBe(focusOf(all));
    expect(merged.adaptations.join()).toMatch(/2 processes side by side/);
  });
});
