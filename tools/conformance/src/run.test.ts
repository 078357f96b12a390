// The result parsers, on output in the shapes the suites write (ginkgo's JSON report, go test -v).
import { describe, expect, it } from 'vitest';
import { parseGinkgo, parseGoTest } from './run.ts';

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

  it('go test -v: one result per conformance test, nested cases folded in, skip and failure messages kept', () => {
    const out = [
      '=== RUN   TestConformance',
      '=== RUN   TestConformance/AdminNetworkPolicyIngressTCP',
      '    --- PASS: TestConformance/AdminNetworkPolicyIngressTCP/Should_support_an_allow-ingress-tcp_policy (3.10s)',
      '--- PASS: TestConformance/AdminNetworkPolicyIngressTCP (12.50s)',
      '--- SKIP: TestConformance/AdminNetworkPolicyEgressNodePeers (0.00s)',
      '        suite.go:178: Skipping AdminNetworkPolicyEgressNodePeers: suite does not support AdminNetworkPolicyEgressNodePeers',
      '    --- FAIL: TestConformance/AdminNetworkPolicyGress (40.00s)',
      '        helpers.go:90: expected connection to succeed',
      '--- FAIL: TestConformance (52.50s)',
    ].join('\n');
    expect(parseGoTest(out)).toEqual([
      { name: 'AdminNetworkPolicyIngressTCP', result: 'passed', seconds: 12.5 },
      {
        name: 'AdminNetworkPolicyEgressNodePeers',
        result: 'skipped',
        seconds: 0,
        reason:
          'suite.go:178: Skipping AdminNetworkPolicyEgressNodePeers: suite does not support AdminNetworkPolicyEgressNodePeers',
      },
      {
        name: 'AdminNetworkPolicyGress',
        result: 'failed',
        seconds: 40,
        reason: 'helpers.go:90: expected connection to succeed',
      },
    ]);
  });
});
