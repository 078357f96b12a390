import type { FlowEvent } from '@cascade/bpf-datapath';
import { describe, expect, it } from 'vitest';
import { NetpolEngine } from '../engine/engine.ts';
import { FlowLog, isLoopback, MAX_POLICY_SERIES } from './flows.ts';

const engine = NetpolEngine.fromCluster({
  namespaces: [{ name: 'app', labels: {} }],
  nodes: [],
  pods: [{ namespace: 'app', name: 'a', labels: {}, ips: ['10.0.0.1'], ports: [] }],
  policies: [],
});
/** What the agent's address index says: the pod owning an address. */
const podAt = (ip: string) => {
  for (const p of engine.pods.values()) if (p.ips.includes(ip)) return `${p.namespace}/${p.name}`;
  return undefined;
};
const ev = (dport: number): FlowEvent => ({
  src: '8.8.8.8',
  dst: '10.0.0.1',
  sport: 1,
  dport,
  proto: 6,
  direction: 'ingress',
  verdict: 'deny',
  reason: 'policy',
  remoteIdentity: 2,
  rule: 7,
  precedence: 1,
});

describe('flow log', () => {
  it('counts staged flows per answerable staged object over the last ten complete minutes', () => {
    const log = new FlowLog(100, 5000);
    const rules = new Map([
      [7, 'NetworkPolicy/app/x#ingress[0]'],
      [9, 'StagedNetworkPolicy/app/x#ingress[0]'],
    ]);
    const staged = (dport: number, rule: number): FlowEvent => ({
      ...ev(dport),
      verdict: 'allow',
      staged: { verdict: 'deny', rule },
    });
    const T = 60_000 * 1000; // a minute boundary
    const answerable = () => ['StagedNetworkPolicy/app/x', 'StagedNetworkPolicy/app/y'];
    const recs = log.add([staged(80, 9), staged(81, 0), ev(82)], podAt, rules, 'n1', T + 1_000, answerable);
    // the record carries the staged part; an unmarked event counts nothing
    expect(recs.map((r) => r.staged)).toEqual([
      { verdict: 'deny', rule: 'StagedNetworkPolicy/app/x#ingress[0]' },
      { verdict: 'deny' },
      undefined,
    ]);
    // the current minute is not complete: nothing yet (the report changes at most once a minute)
    expect(log.stagedWindow(T + 30_000)).toEqual([]);
    expect(log.stagedWindow(T + 60_000)).toEqual([
      { staged: 'StagedNetworkPolicy/app/x', direction: 'ingress', verdict: 'deny', flows: 1 },
      {
        staged: 'StagedNetworkPolicy/app/x',
        direction: 'ingress',
        verdict: 'deny',
        rule: 'StagedNetworkPolicy/app/x#ingress[0]',
        flows: 1,
      },
      { staged: 'StagedNetworkPolicy/app/y', direction: 'ingress', verdict: 'deny', flows: 1 },
      {
        staged: 'StagedNetworkPolicy/app/y',
        direction: 'ingress',
        verdict: 'deny',
        rule: 'StagedNetworkPolicy/app/x#ingress[0]',
        flows: 1,
      },
    ]);
    // ten minutes later the minute has left the window
    expect(log.stagedWindow(T + 11 * 60_000)).toEqual([]);
    expect(log.stagedSamples()).toContainEqual([
      { policy: 'StagedNetworkPolicy/app/x', direction: 'ingress', verdict: 'deny' },
      1,
    ]);
  });

  it('names pods and the rule; one report per flow per period (the rest counted)', () => {
    const log = new FlowLog(100, 5000);
    const rules = new Map([[7, 'NetworkPolicy/app/x#ingress[0]']]);
    const first = log.add([ev(80), ev(80), ev(443)], podAt, rules, 'n1', 1_000);
    expect(first.map((r) => [r.from, r.to, r.port, r.rule])).toEqual([
      ['8.8.8.8', 'app/a', 80, 'NetworkPolicy/app/x#ingress[0]'],
      ['8.8.8.8', 'app/a', 443, 'NetworkPolicy/app/x#ingress[0]'],
    ]);
    expect(log.dropped).toBe(1);
    expect(log.add([ev(80)], podAt, rules, 'n1', 3_000)).toHaveLength(0);
    // the next record of the flow says how many reports were left out since the last one
    expect(log.add([ev(80)], podAt, rules, 'n1', 7_000)).toMatchObject([{ port: 80, repeats: 2 }]);
    expect(log.add([ev(80)], podAt, rules, 'n1', 13_000)[0]?.repeats).toBeUndefined();
  });

  it('keeps at most its capacity', () => {
    const log = new FlowLog(3, 0);
    for (let p = 1; p <= 10; p++) log.add([ev(p)], podAt, new Map(), 'n1', p);
    const served: string[] = [];
    const res = { writeHead() {}, write: (s: string) => served.push(s), end() {} };
    log.handle({ url: '/flows', on() {}, socket: { remoteAddress: '127.0.0.1' } } as never, res as never);
    expect(served.map((s) => JSON.parse(s).port)).toEqual([8, 9, 10]);
  });

  it('serves loopback peers only, whatever address the metrics listen on', () => {
    const log = new FlowLog(3, 0);
    log.add([ev(80)], podAt, new Map(), 'n1', 1);
    const ask = (remoteAddress: string | undefined) => {
      let status = 0;
      let body = '';
      const res = {
        writeHead: (s: number) => {
          status = s;
        },
        write: (s: string) => {
          body += s;
        },
        end: (s = '') => {
          body += s;
        },
      };
      expect(log.handle({ url: '/flows', on() {}, socket: { remoteAddress } } as never, res as never)).toBe(
        true,
      );
      return { status, body };
    };
    for (const peer of ['127.0.0.1', '::1', '::ffff:127.0.0.1', '127.3.4.5'])
      expect(ask(peer)).toMatchObject({ status: 200, body: expect.stringContaining('"port":80') });
    for (const peer of ['10.244.0.7', '::ffff:10.0.0.1', 'fd00::1', '1270.0.0.1', undefined]) {
      const r = ask(peer);
      expect(r.status).toBe(403);
      expect(r.body).toMatch(/loopback only.*cascadectl flows --node/);
      expect(r.body).not.toContain('"port"');
    }
    expect(isLoopback('127.0.0.1')).toBe(true);
    expect(isLoopback('::ffff:192.168.1.1')).toBe(false);
  });
});

describe('per-policy verdict counts (cascade_datapath_policy_flows_total)', () => {
  it('every reported flow counts for its deciding policy, direction and verdict, the per-flow limit aside', () => {
    const log = new FlowLog(100, 5000);
    const rules = new Map([[7, 'NetworkPolicy/app/x#ingress[0]']]);
    log.add(
      [ev(80), ev(80), { ...ev(53), direction: 'egress', verdict: 'allow', rule: 0, reason: 'rejudged' }],
      podAt,
      rules,
      'n1',
    );
    expect(log.policySamples()).toEqual([
      [{ policy: 'NetworkPolicy/app/x', direction: 'ingress', verdict: 'deny' }, 2],
      [{ policy: '(rejudged)', direction: 'egress', verdict: 'allow' }, 1],
    ]);
  });

  it(`is bounded: past ${MAX_POLICY_SERIES} policies, the others count as "other"`, () => {
    const log = new FlowLog(100, 5000);
    const rules = new Map(
      Array.from({ length: MAX_POLICY_SERIES + 50 }, (_, i) => [i + 1, `NetworkPolicy/app/p${i}#ingress[0]`]),
    );
    log.add(
      Array.from({ length: MAX_POLICY_SERIES + 50 }, (_, i) => ({ ...ev(1000 + i), rule: i + 1 })),
      podAt,
      rules,
      'n1',
    );
    const samples = log.policySamples();
    expect(samples).toHaveLength(MAX_POLICY_SERIES + 1);
    expect(samples.find(([l]) => l.policy === 'other')?.[1]).toBe(50);
  });
});
