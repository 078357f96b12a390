import type { Run } from '@cascade/bpf-datapath';
import { describe, expect, it } from 'vitest';
import { podBridgeAddresses, preferNodeSource, sourceFixes, tunnelAddresses } from './host-source.ts';

// what `ip -j` prints on a node of the one-machine cluster (trimmed to the fields read)
const links = [
  { ifindex: 1, ifname: 'lo' },
  { ifindex: 2, ifname: 'eth0' },
  { ifindex: 3, ifname: 'cascade0', linkinfo: { info_kind: 'bridge' } },
  { ifindex: 7, ifname: 'veth1', master: 'cascade0', linkinfo: { info_kind: 'veth' } },
  { ifindex: 8, ifname: 'docker0', linkinfo: { info_kind: 'bridge' } },
  { ifindex: 9, ifname: 'veth2', master: 'docker0', linkinfo: { info_kind: 'veth' } },
];
const addrs = [
  { ifname: 'lo', addr_info: [{ local: '127.0.0.1', prefixlen: 8, scope: 'host' }] },
  {
    ifname: 'eth0',
    addr_info: [
      { local: '10.250.0.11', prefixlen: 24, scope: 'global' },
      { local: 'fd00:250::11', prefixlen: 64, scope: 'global' },
    ],
  },
  {
    ifname: 'cascade0',
    addr_info: [
      { local: '10.244.1.1', prefixlen: 24, scope: 'global' },
      { local: 'fd00:244:1::1', prefixlen: 64, scope: 'global' },
      { local: 'fe80::1', prefixlen: 64, scope: 'link' },
    ],
  },
];
const v4 = [
  { dst: 'default', gateway: '10.250.0.1', dev: 'eth0' },
  { dst: '10.244.1.0/24', dev: 'cascade0', protocol: 'kernel', scope: 'link', prefsrc: '10.244.1.1' },
  { dst: '172.17.0.0/16', dev: 'docker0', protocol: 'kernel', scope: 'link', prefsrc: '172.17.0.1' },
  { dst: '10.250.0.0/24', dev: 'eth0', protocol: 'kernel', scope: 'link', prefsrc: '10.250.0.11' },
  { type: 'blackhole', dst: '10.244.0.0/16' },
];
const v6 = [{ dst: 'fd00:244:1::/64', dev: 'cascade0', protocol: 'kernel', metric: 256 }];
const NODE = ['10.250.0.11', 'fd00:250::11'];

describe("the node's own traffic to its pods leaves with the node's address", () => {
  it('rewrites only the kernel routes of bridges holding pod interfaces, per family, to a local node address', () => {
    const fixes = sourceFixes(
      [
        { family: 4, list: v4 },
        { family: 6, list: v6 },
      ],
      links,
      addrs,
      NODE,
      new Set([7]),
    );
    expect(fixes).toEqual([
      { dst: '10.244.1.0/24', dev: 'cascade0', family: 4, from: '10.244.1.1', src: '10.250.0.11' },
      { dst: 'fd00:244:1::/64', dev: 'cascade0', family: 6, metric: 256, src: 'fd00:250::11' },
    ]);
  });

  it('nothing when already done, when no pod is on a bridge (routed CNIs), or when the node address is not local', () => {
    const done = [{ ...v4[1]!, prefsrc: '10.250.0.11' }];
    expect(sourceFixes([{ family: 4, list: done }], links, addrs, NODE, new Set([7]))).toEqual([]);
    expect(sourceFixes([{ family: 4, list: v4 }], links, addrs, NODE, new Set([2]))).toEqual([]);
    expect(sourceFixes([{ family: 4, list: v4 }], links, addrs, ['10.250.0.99'], new Set([7]))).toEqual([]);
  });

  it("routes a pod bridge's subnet again when the kernel dropped its route (a node address that went away took it)", () => {
    const without = v4.filter((r) => r.dev !== 'cascade0');
    expect(sourceFixes([{ family: 4, list: without }], links, addrs, NODE, new Set([7]))).toEqual([
      { dst: '10.244.1.0/24', dev: 'cascade0', family: 4, src: '10.250.0.11' },
    ]);
  });

  it('runs iproute2 with argument vectors; malformed kernel output changes nothing', async () => {
    const calls: string[][] = [];
    const run =
      (answers: Record<string, string>): Run =>
      async (cmd, args) => {
        calls.push([cmd, ...args]);
        if (args.includes('replace')) return '';
        if (args.includes('route')) return args[0] === '-4' ? answers.v4! : answers.v6!;
        if (args.includes('link')) return answers.links!;
        return answers.addrs!;
      };
    const ok = {
      v4: JSON.stringify(v4),
      v6: JSON.stringify(v6),
      links: JSON.stringify(links),
      addrs: JSON.stringify(addrs),
    };
    const found = await preferNodeSource(run(ok), NODE, new Set([7]));
    expect(found.fixes).toHaveLength(2);
    // what the node's report says: the pod bridge's global addresses (not docker0's, not link-local)
    expect(found.bridgeAddresses).toEqual(['10.244.1.1', 'fd00:244:1::1']);
    expect(calls.filter((c) => c.includes('replace'))).toEqual([
      [
        'ip',
        '-4',
        'route',
        'replace',
        '10.244.1.0/24',
        'dev',
        'cascade0',
        'proto',
        'kernel',
        'scope',
        'link',
        'src',
        '10.250.0.11',
      ],
      [
        'ip',
        '-6',
        'route',
        'replace',
        'fd00:244:1::/64',
        'dev',
        'cascade0',
        'proto',
        'kernel',
        'scope',
        'link',
        'metric',
        '256',
        'src',
        'fd00:250::11',
      ],
    ]);
    calls.length = 0;
    expect(await preferNodeSource(run({ ...ok, v4: 'not json', links: '{}' }), NODE, new Set([7]))).toEqual({
      fixes: [],
      bridgeAddresses: [],
    });
    expect(calls.some((c) => c.includes('replace'))).toBe(false);
    const evil = JSON.stringify([
      { ...v4[1], prefsrc: '10.250.0.11' },
      { dst: '10.244.1.0/24; reboot', dev: 'cascade0', protocol: 'kernel' },
      { dst: '10.244.9.0/24', dev: 'cascade0 && reboot', protocol: 'kernel' },
    ]);
    expect(
      await preferNodeSource(
        run({ ...ok, v4: evil, v6: JSON.stringify([{ ...v6[0], prefsrc: 'fd00:250::11' }]) }),
        NODE,
        new Set([7]),
      ),
    ).toMatchObject({ fixes: [] });
  });

  it("a pod bridge's addresses: global ones, of bridges holding a pod interface, bounded", () => {
    expect(podBridgeAddresses(links, addrs, new Set([7]))).toEqual(['10.244.1.1', 'fd00:244:1::1']);
    expect(podBridgeAddresses(links, addrs, new Set([9]))).toEqual([]); // docker0 has no address here
    expect(podBridgeAddresses(links, addrs, new Set([2]))).toEqual([]); // not on a bridge
    const many = [
      {
        ifname: 'cascade0',
        addr_info: Array.from({ length: 40 }, (_, i) => ({ local: `10.244.${i}.1`, scope: 'global' })),
      },
      { ifname: 'cascade0', addr_info: [{ local: 'not-an-address', scope: 'global' }] },
    ];
    const got = podBridgeAddresses(links, many, new Set([7]));
    expect(got).toHaveLength(16);
    expect(got).not.toContain('not-an-address');
  });

  it("a node's tunnel addresses: global ones of vxlan, ipip, wireguard... devices, never a bridge's or eth0's", () => {
    const seen = {
      links: [
        { ifindex: 2, ifname: 'eth0', linkinfo: {} },
        { ifindex: 3, ifname: 'cascade0', linkinfo: { info_kind: 'bridge' } },
        { ifindex: 4, ifname: 'flannel.1', linkinfo: { info_kind: 'vxlan' } },
        { ifindex: 5, ifname: 'tunl0', linkinfo: { info_kind: 'ipip' } },
        { ifindex: 6, ifname: 'kube-ipvs0', linkinfo: { info_kind: 'dummy' } },
      ],
      addrs: [
        { ifname: 'eth0', addr_info: [{ local: '10.250.0.11', scope: 'global' }] },
        { ifname: 'cascade0', addr_info: [{ local: '10.244.1.1', scope: 'global' }] },
        {
          ifname: 'flannel.1',
          addr_info: [
            { local: '10.244.1.0', scope: 'global' },
            { local: 'fe80::1', scope: 'link' },
          ],
        },
        { ifname: 'tunl0', addr_info: [{ local: '10.244.1.64', scope: 'global' }] },
        // IPVS holds every ClusterIP on a dummy device: not the node's own
        { ifname: 'kube-ipvs0', addr_info: [{ local: '10.96.0.1', scope: 'global' }] },
      ],
    };
    expect(tunnelAddresses(seen)).toEqual(['10.244.1.0', '10.244.1.64']);
    const many = {
      links: seen.links,
      addrs: [
        {
          ifname: 'flannel.1',
          addr_info: [
            ...Array.from({ length: 40 }, (_, i) => ({ local: `10.244.${i}.0`, scope: 'global' })),
            { local: '10.244.1.0; reboot', scope: 'global' },
          ],
        },
      ],
    };
    const got = tunnelAddresses(many);
    expect(got).toHaveLength(16);
    expect(got.every((a) => /^10\.244\.\d+\.0$/.test(a))).toBe(true);
    expect(tunnelAddresses({ links: [], addrs: [] })).toEqual([]);
  });
});
