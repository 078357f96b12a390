import { describe, expect, it } from 'vitest';
import { cpuBetween, hostBusy, roleOf } from './procs.ts';
import { peersTable } from './table.ts';

describe("the enforcers' processes", () => {
  it('knows each enforcer by its command line and nothing else', () => {
    expect(roleOf(['/usr/local/bin/node', '/app/packages/netpolicy/src/agent/main.ts'])).toBe(
      'cascade agent',
    );
    expect(roleOf(['node', '/app/packages/netpolicy/src/controller/main.ts', '--x'])).toBe(
      'cascade netpolicy-controller',
    );
    expect(roleOf(['/bin/netpol', '--hostname-override=n1'])).toBe('kube-network-policies');
    expect(roleOf(['/app/packages/bpf-datapath/build/cascade-bpfctl'])).toBe('cascade agent');
    expect(roleOf(['/usr/local/bin/cascade-probe', 'serve', '8080'])).toBeUndefined();
    expect(roleOf(['node', 'packages/authpolicy/src/main.ts'])).toBeUndefined();
    expect(roleOf([])).toBeUndefined();
  });

  it('counts CPU per role between snapshots; a new process counts from zero', () => {
    const p = (pid: number, role: string, cpu: number) => ({ pid, role, cpu, rssMiB: 1 });
    const d = cpuBetween([p(1, 'a', 5), p(2, 'a', 1)], [p(1, 'a', 7), p(2, 'a', 1.5), p(3, 'b', 0.25)]);
    expect(d.get('a')).toBeCloseTo(2.5);
    expect(d.get('b')).toBeCloseTo(0.25);
    expect(hostBusy()).toBeGreaterThan(0);
  });

  it('makes one row per figure and one column per enforcer', () => {
    const f = (name: string, value: number) => ({
      suite: 'peers',
      name,
      value,
      unit: 'ms',
      input: '',
      date: '2026-11-29T04:00:00Z',
    });
    const t = peersTable([
      f('change, p50 [cascade]', 65),
      f('change, p50 [kube-network-policies v0.8.0]', 1.5),
      f('other [cluster]', 1),
      f('cascade agent: idle CPU [cascade]', 2),
      f('kube-network-policies: idle CPU [kube-network-policies v0.8.0]', 0.06),
      { ...f('x [cascade]', 1), suite: 'cluster' },
    ]);
    expect(t.split('\n')).toEqual([
      '| 2026-11-29T04:00 | cascade | kube-network-policies v0.8.0 | no enforcement |',
      '|---|---|---|---|',
      '| change, p50 | 65 ms | 1.50 ms | - |',
      '| agents: idle CPU | 2 ms | 0.06 ms | - |',
      '',
    ]);
  });
});
