import { describe, expect, it } from 'vitest';
import { chartPaths, layout, NODE_VIEW, STATE } from './layout.ts';

describe('cluster layout', () => {
  it('one node is the host, as before: its address, 10.244.0.0/24, the state directory itself', () => {
    const l = layout(1, '192.0.2.2');
    expect(l.nodes).toEqual([
      expect.objectContaining({
        name: 'cascade-node',
        placement: 'host',
        ip: '192.0.2.2',
        podCidr: '10.244.0.0/24',
        hostDir: STATE,
      }),
    ]);
    expect(chartPaths(l).cniBinDir).toBe(`${STATE}/cni/bin`);
  });

  it('N nodes: each its own namespace, link address and pod subnet, none overlapping the host node', () => {
    const l = layout(3, '192.0.2.2');
    expect(l.nodes.map((n) => [n.name, n.netns, n.ip, n.podCidr, n.gateway, n.cgroupRoot])).toEqual([
      ['cascade-node-1', 'cascade-node-1', '10.250.0.11', '10.244.1.0/24', '10.244.1.1', '/cascade-node-1'],
      ['cascade-node-2', 'cascade-node-2', '10.250.0.12', '10.244.2.0/24', '10.244.2.1', '/cascade-node-2'],
      ['cascade-node-3', 'cascade-node-3', '10.250.0.13', '10.244.3.0/24', '10.244.3.1', '/cascade-node-3'],
    ]);
    // the chart's CNI directory is one path, each node's own behind it
    expect(chartPaths(l).cniBinDir).toBe(`${NODE_VIEW}/cni/bin`);
    expect(new Set(l.nodes.map((n) => n.hostDir)).size).toBe(3);
  });

  it('a node count out of range is refused', () => {
    for (const n of [0, 9, 1.5, Number.NaN])
      expect(() => layout(n, '192.0.2.2')).toThrow(/--nodes: want 1 to 8/);
  });
});
