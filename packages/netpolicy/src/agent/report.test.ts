import { describe, expect, it } from 'vitest';
import {
  MAX_BRIDGE_ADDRESSES,
  MAX_TUNNEL_ADDRESSES,
  netpolNodeReportCrd,
  nodeReportFromObject,
} from '../cluster/node-report.ts';
import { finding, NodeReporter } from './report.ts';

describe("a node's report", () => {
  it("says the pod bridges' addresses, sorted and bounded, and only when there are some", () => {
    const f = finding('PodAddressConflict', 'Pod', 'a', 'p', 'taken');
    expect(NodeReporter.spec([f])).toEqual({ findings: [f] });
    const many = Array.from({ length: 40 }, (_, i) => `10.244.${i}.1`);
    const spec = NodeReporter.spec([], { bridges: ['fd00::1', ...many, '10.244.0.1'] });
    expect(spec.podBridgeAddresses).toHaveLength(MAX_BRIDGE_ADDRESSES);
    expect(spec.podBridgeAddresses![0]).toBe('10.244.0.1');
    // what it writes, it reads back as written (the restart's comparison with the live object)
    expect(nodeReportFromObject({ spec })).toEqual(spec);
  });

  it("says the node's tunnel addresses beside its bridges', each sorted and bounded", () => {
    const many = Array.from({ length: 40 }, (_, i) => `10.244.${i}.0`);
    const spec = NodeReporter.spec([], { bridges: ['10.244.1.1'], tunnels: [...many, '10.244.1.0'] });
    expect(spec.podBridgeAddresses).toEqual(['10.244.1.1']);
    expect(spec.tunnelAddresses).toHaveLength(MAX_TUNNEL_ADDRESSES);
    expect(spec.tunnelAddresses![0]).toBe('10.244.0.0');
    expect(nodeReportFromObject({ spec })).toEqual(spec);
    expect(NodeReporter.spec([], { tunnels: [] })).toEqual({ findings: [] });
    const bad = nodeReportFromObject({ spec: { findings: [], tunnelAddresses: ['10.244.1.0/24'] } });
    expect(bad).toEqual({ error: expect.stringContaining('tunnelAddresses') });
  });

  it('a report naming no address where one belongs is refused whole, with the field', () => {
    const r = nodeReportFromObject({ spec: { findings: [], podBridgeAddresses: ['10.244.1.1; reboot'] } });
    expect(r).toEqual({ error: expect.stringContaining('podBridgeAddresses') });
  });

  it('the CRD keeps the field (a structural schema prunes what it does not name)', () => {
    const props = (
      netpolNodeReportCrd as unknown as {
        spec: {
          versions: { schema: { openAPIV3Schema: { properties: { spec: { properties: object } } } } }[];
        };
      }
    ).spec.versions[0]!.schema.openAPIV3Schema.properties.spec.properties;
    expect(props).toHaveProperty('podBridgeAddresses');
    expect(props).toHaveProperty('tunnelAddresses');
  });
});
