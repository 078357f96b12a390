import { describe, expect, it } from 'vitest';
import type { Node } from '../engine/model.ts';
import { NodeAddresses } from './node-addresses.ts';

function recorder() {
  const seen: string[] = [];
  const engine = {
    upsertNode: (n: Node) => void seen.push(`${n.name} ${n.ips.join(',')}`),
    removeNode: (name: string) => void seen.push(`${name} removed`),
  };
  return { seen, addresses: new NodeAddresses(engine) };
}

const node = (name: string, ...ips: string[]): Node => ({ name, labels: {}, ips });

describe("a node's addresses: its Node's, then its report's tunnel addresses", () => {
  it('in either order; the Node object first; none twice; a report alone says nothing', () => {
    const { seen, addresses } = recorder();
    addresses.report('n1', ['10.244.1.0']); // the Node not there yet: nothing
    expect(seen).toEqual([]);
    addresses.node('n1', node('n1', '10.250.0.11'));
    addresses.report('n2', ['10.244.2.0', '10.250.0.12']);
    addresses.node('n2', node('n2', '10.250.0.12'));
    expect(seen).toEqual(['n1 10.250.0.11,10.244.1.0', 'n2 10.250.0.12,10.244.2.0']);
  });

  it('a report that changes pushes the node again; one that does not, nothing; a deleted report takes its addresses', () => {
    const { seen, addresses } = recorder();
    addresses.node('n1', node('n1', '10.250.0.11'));
    expect(addresses.report('n1', ['10.244.1.0'])).toBe(true);
    expect(addresses.report('n1', ['10.244.1.0'])).toBe(false); // its findings changed, say
    expect(addresses.report('n1', undefined)).toBe(true);
    expect(addresses.report('n1', undefined)).toBe(false);
    expect(addresses.tunnels.size).toBe(0);
    expect(seen).toEqual(['n1 10.250.0.11', 'n1 10.250.0.11,10.244.1.0', 'n1 10.250.0.11']);
  });

  it('a deleted Node leaves the engine; its report alone does not bring it back', () => {
    const { seen, addresses } = recorder();
    addresses.node('n1', node('n1', '10.250.0.11'));
    addresses.report('n1', ['10.244.1.0']);
    addresses.node('n1');
    addresses.report('n1', ['10.244.1.0', '10.244.1.1']);
    expect(seen.slice(2)).toEqual(['n1 removed']);
  });
});
