import { describe, expect, it } from 'vitest';
import { flannelConflist, netConf, subnetFile } from './flannel.ts';
import { netnsNode } from './layout.ts';
import { PEER_IMAGE, peerManifest } from './peer.ts';

describe("a flannel node's CNI configuration", () => {
  it("is kube-flannel's: flannel (delegating to the node's bridge) then portmap; nothing of Cascade", () => {
    const n = netnsNode(2);
    const c = JSON.parse(flannelConflist(n)) as {
      cniVersion: string;
      plugins: { type: string; subnetFile?: string; delegate?: Record<string, unknown> }[];
    };
    expect(c.cniVersion).toBe('0.3.1');
    expect(c.plugins.map((p) => p.type)).toEqual(['flannel', 'portmap']);
    // each node reads its own lease: the nodes share /run
    expect(c.plugins[0]!.subnetFile).toBe(subnetFile(n));
    expect(subnetFile(n)).not.toBe(subnetFile(netnsNode(1)));
    expect(c.plugins[0]!.delegate).toMatchObject({ bridge: 'cascade0', isDefaultGateway: true });
    expect(JSON.parse(netConf())).toEqual({ Network: '10.244.0.0/16', Backend: { Type: 'vxlan' } });
  });
});

describe("kube-network-policies' manifest", () => {
  const upstream = [
    'kind: DaemonSet',
    'spec:',
    '  template:',
    '    spec:',
    '      containers:',
    '      - name: kube-network-policies',
    '        image: registry.k8s.io/networking/kube-network-policies:v0.7.0',
    '        args: [/bin/netpol]',
  ].join('\n');

  it('runs the image built here, never pulled; the rest is as upstream wrote it', () => {
    const m = peerManifest(upstream);
    expect(m).toContain(
      `        image: ${PEER_IMAGE}\n        imagePullPolicy: Never\n        args: [/bin/netpol]`,
    );
    expect(m).not.toContain('registry.k8s.io');
  });

  it('a manifest naming another image is refused, not run with it', () => {
    expect(() => peerManifest(upstream.replace('registry.k8s.io/networking/', 'example.com/'))).toThrow(
      /names no image of its own/,
    );
  });
});
