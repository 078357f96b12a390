// A Service as the destination of netpol simulate / explain: answered per backend, each judged on its
// own address and port (examples/netpol plus test/fixtures/netpol-services.yaml).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { run } from './run.ts';

const NP = resolve(import.meta.dirname, '../../../examples/netpol');
const SVC = resolve(import.meta.dirname, 'fixtures/netpol-services.yaml');

describe('Services as destinations', () => {
  it('explain by ClusterIP and by svc:ns/name: the backend pod on its targetPort decides, not "world"', async () => {
    for (const to of ['10.96.0.50', 'svc:payments/ledger']) {
      const r = await run('netpol', 'explain', NP, SVC, '--from', 'shop/cart', '--to', to, '--port', '443');
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(
        /^shop\/cart -> Service payments\/ledger:grpc \(10\.96\.0\.50:443\): 1 backend/,
      );
      expect(r.stdout).toContain('shop/cart -> payments/ledger TCP/7443');
      expect(r.stdout).toContain('AdminNetworkPolicy/protect-sensitive shop-to-ledger-grpc');
      expect(r.stdout).not.toContain('world');
      expect(r.stdout.trimEnd()).toMatch(/=> ALLOW$/);
    }
  });

  it('simulate answers per backend (not-ready endpoints left out), a named Service port, no backend, and the pod as its own only backend', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-probes-'));
    const probes = join(dir, 'probes.yaml');
    writeFileSync(
      probes,
      [
        '- {from: shop/cart, to: svc:payments/ledger, port: grpc}',
        '- {from: sandbox/toy, to: 10.96.0.50, port: 443}',
        '- {from: shop/web, to: svc:shop/empty, port: 80}',
        '- {from: shop/cart, to: svc:shop/cart, port: 80}',
        '- {from: shop/web, to: svc:shop/cart, port: 80}',
      ].join('\n'),
    );
    const r = await run('netpol', 'simulate', NP, SVC, '--probes', probes, '-o', 'json');
    expect(r.code).toBe(0);
    const res = JSON.parse(r.stdout) as {
      from: string;
      to: string;
      port: number;
      verdict: string;
      service?: { name: string; frontend: string; backend?: string; note?: string };
      ingress?: { decidedBy: { policy?: string } };
    }[];
    expect(res.map((x) => [x.from, x.to, x.port, x.verdict, x.service?.backend ?? x.service?.note])).toEqual([
      ['shop/cart', 'payments/ledger', 7443, 'allow', '10.2.0.20:7443'],
      ['sandbox/toy', 'payments/ledger', 7443, 'deny', '10.2.0.20:7443'],
      [
        'shop/web',
        'svc:shop/empty',
        80,
        'deny', // judged as the ClusterIP itself: web's egress allows no such address
        'no ready endpoint: the datapath leaves the flow to kube-proxy, which rejects it',
      ],
      [
        'shop/cart',
        'svc:shop/cart',
        80,
        'allow',
        'the source is the only backend: allowed, as a pod reaching itself',
      ],
      ['shop/web', 'shop/cart', 9000, expect.any(String), '10.1.0.11:9000'],
    ]);
    expect(res[1]!.ingress?.decidedBy.policy).toBe('AdminNetworkPolicy/protect-sensitive'); // toy is no shop pod
  });

  it("a NodePort: translated at the source on the pod's own node (source kept); dialled elsewhere, forwarded by kube-proxy with masquerade and judged with the source the backend sees, never as the backend's own node", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'np-probes-'));
    const probes = join(dir, 'probes.yaml');
    // cart (the backend, node-b) admits only web; web runs on node-a (192.168.10.1)
    writeFileSync(
      probes,
      [
        '- {from: shop/web, to: 192.168.10.1, port: 30080}', // web's own node: the datapath translates it
        '- {from: shop/web, to: 192.168.10.2, port: 30080}', // the backend's node: kube-proxy there, bridge address
        '- {from: 203.0.113.9, to: 192.168.10.2, port: 30080}', // outside, the backend's node
        '- {from: 203.0.113.9, to: 192.168.10.1, port: 30080}', // outside, a node without the backend
        '- {from: 203.0.113.9, to: 192.168.10.1, port: 30081}', // not a NodePort: the node itself
      ].join('\n'),
    );
    const r = await run('netpol', 'simulate', NP, SVC, '--probes', probes, '-o', 'json');
    expect(r.code).toBe(0);
    const res = JSON.parse(r.stdout) as {
      to: string;
      port: number;
      verdict: string;
      service?: { frontend: string; backend?: string; source?: string };
      ingress?: { decidedBy: { tier: string; policy?: string } };
    }[];
    expect(
      res.map((x) => [x.to, x.port, x.verdict, x.service?.source ?? null, x.ingress?.decidedBy.tier ?? null]),
    ).toEqual([
      ['shop/cart', 9000, 'allow', null, 'networkpolicy'],
      ['shop/cart', 9000, 'deny', '0.0.0.0', 'networkpolicy'],
      ['shop/cart', 9000, 'deny', '0.0.0.0', 'networkpolicy'],
      ['shop/cart', 9000, 'deny', '192.168.10.1', 'networkpolicy'],
      ['192.168.10.1', 30081, 'allow', null, null],
    ]);
    expect(res[3]!.service?.frontend).toBe('192.168.10.1:30080');
    expect(res[3]!.ingress?.decidedBy.policy).toBe('NetworkPolicy/shop/cart-from-web');
  });

  it("a NodePort masqueraded to a backend on the dialled node comes from that node's pod bridge, as its NetpolNodeReport says: an ipBlock holding that address admits it, as in the kernel", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'np-bridge-'));
    const probes = join(dir, 'probes.yaml');
    writeFileSync(
      probes,
      [
        '- {from: shop/web, to: 192.168.10.2, port: 30080}', // web (node-a) -> node-b, where cart runs
        '- {from: 203.0.113.9, to: 192.168.10.2, port: 30080}', // outside -> node-b
        '- {from: 203.0.113.9, to: 192.168.10.1, port: 30080}', // outside -> node-a: node-a's address
      ].join('\n'),
    );
    // cart admits its node's pod bridge too (an ipBlock holding it: say, a pod range); node-b's report
    const extra = join(dir, 'bridge.yaml');
    writeFileSync(
      extra,
      [
        'apiVersion: networking.k8s.io/v1',
        'kind: NetworkPolicy',
        'metadata: { name: cart-from-bridge, namespace: shop }',
        'spec:',
        '  podSelector: { matchLabels: { app: cart } }',
        '  policyTypes: [Ingress]',
        '  ingress: [{ from: [{ ipBlock: { cidr: 10.1.0.0/24 } }] }]',
        '---',
        'apiVersion: cascade.dev/v1alpha1',
        'kind: NetpolNodeReport',
        'metadata: { name: node-b }',
        'spec: { findings: [], podBridgeAddresses: [10.1.0.1, "fd00:1::1"] }',
      ].join('\n'),
    );
    const answer = async (...files: string[]) => {
      const r = await run('netpol', 'simulate', NP, SVC, ...files, '--probes', probes, '-o', 'json');
      expect(r.stderr).not.toContain('error');
      return (JSON.parse(r.stdout) as { verdict: string; service?: { source?: string } }[]).map((x) => [
        x.verdict,
        x.service?.source,
      ]);
    };
    expect(await answer(extra)).toEqual([
      ['allow', '10.1.0.1'],
      ['allow', '10.1.0.1'],
      ['deny', '192.168.10.1'],
    ]);
    // without the report the bridge is unknown: the world's address, which the ipBlock does not hold
    const noReport = join(dir, 'policy-only.yaml');
    writeFileSync(noReport, (await import('node:fs')).readFileSync(extra, 'utf8').split('---')[0]!);
    expect(await answer(noReport)).toEqual([
      ['deny', '0.0.0.0'],
      ['deny', '0.0.0.0'],
      ['deny', '192.168.10.1'],
    ]);
    // a report with a bad address is refused whole, naming the object and the field
    const bad = join(dir, 'bad.yaml');
    writeFileSync(
      bad,
      'apiVersion: cascade.dev/v1alpha1\nkind: NetpolNodeReport\nmetadata: { name: node-b }\nspec: { findings: [], podBridgeAddresses: ["10.1.0.1/24"] }\n',
    );
    const r = await run('netpol', 'simulate', NP, SVC, bad, '--probes', probes, '-o', 'json');
    expect(r.stderr).toMatch(
      /NetpolNodeReport node-b\).*podBridgeAddresses.*not an IP address; its pod-bridge and tunnel addresses left out/,
    );
  });

  it("a node's tunnel address (its NetpolNodeReport's, flannel.1's) is that node: a nodes peer holds it (no way round an admin's deny), and a NodePort masqueraded towards another node's backend leaves with it", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'np-tunnel-'));
    const probes = join(dir, 'probes.yaml');
    writeFileSync(
      probes,
      [
        '- {from: shop/cart, to: 10.1.9.0, port: 10250}', // cart -> node-a's overlay address
        '- {from: 203.0.113.9, to: 192.168.10.1, port: 30080}', // outside -> node-a; cart runs on node-b
      ].join('\n'),
    );
    const anp = [
      'apiVersion: policy.networking.k8s.io/v1alpha1',
      'kind: AdminNetworkPolicy',
      'metadata: { name: cart-reaches-no-node }',
      'spec:',
      '  priority: 5',
      '  subject: { pods: { namespaceSelector: {}, podSelector: { matchLabels: { app: cart } } } }',
      '  egress: [{ name: no-nodes, action: Deny, to: [{ nodes: { matchLabels: { role: worker } } }] }]',
    ].join('\n');
    const report =
      'apiVersion: cascade.dev/v1alpha1\nkind: NetpolNodeReport\nmetadata: { name: node-a }\nspec: { findings: [], tunnelAddresses: [10.1.9.0] }\n';
    const answer = async (...docs: string[]) => {
      const f = join(dir, `extra-${docs.length}.yaml`);
      writeFileSync(f, docs.join('\n---\n'));
      const r = await run('netpol', 'simulate', NP, SVC, f, '--probes', probes, '-o', 'json');
      expect(r.stderr).not.toContain('error');
      return (
        JSON.parse(r.stdout) as {
          verdict: string;
          egress?: { decidedBy: { policy?: string } };
          service?: { source?: string };
        }[]
      ).map((x) => [x.verdict, x.egress?.decidedBy.policy, x.service?.source]);
    };
    const [first, second] = await answer(anp, report);
    expect(first).toEqual(['deny', 'AdminNetworkPolicy/cart-reaches-no-node', undefined]);
    expect(second![2]).toBe('10.1.9.0');
    // without the report, 10.1.9.0 is no node's: the admin policy does not hold it
    const [first2, second2] = await answer(anp);
    expect(first2![1]).not.toBe('AdminNetworkPolicy/cart-reaches-no-node');
    expect(second2![2]).toBe('192.168.10.1');
  });

  it('a pod without an address: left out silently while Pending, being deleted or finished (no traffic), reported otherwise', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cascade-noaddr-'));
    const pod = (name: string, status: Record<string, unknown>, meta: Record<string, unknown> = {}) =>
      `---\napiVersion: v1\nkind: Pod\nmetadata: ${JSON.stringify({ name, namespace: 'shop', labels: { app: name }, ...meta })}\nspec: {containers: [{name: app, image: x}]}\nstatus: ${JSON.stringify(status)}\n`;
    const file = join(dir, 'pods.yaml');
    writeFileSync(
      file,
      pod('starting', { phase: 'Pending' }) +
        pod('leaving', { phase: 'Running' }, { deletionTimestamp: '2026-12-02T06:00:00Z' }) +
        pod('done', { phase: 'Succeeded' }),
    );
    const quiet = await run('netpol', 'simulate', NP, file, '-n', 'shop');
    expect(quiet.stderr).not.toContain('no address');
    expect(quiet.code).toBe(0);
    writeFileSync(file, pod('odd', { phase: 'Running' }));
    const odd = await run('netpol', 'simulate', NP, file, '-n', 'shop');
    expect(odd.stderr).toContain('(Pod shop/odd): status.podIP: the pod has no address yet; left out');
  });

  it('a Service port that does not exist is a usage error naming what exists; a bad Service is reported by field', async () => {
    const r = await run(
      'netpol',
      'explain',
      NP,
      SVC,
      '--from',
      'shop/cart',
      '--to',
      'svc:payments/ledger',
      '--port',
      '80',
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      'Service payments/ledger has no TCP port of that number or name (it has grpc=443/TCP)',
    );
    const missing = await run(
      'netpol',
      'explain',
      NP,
      SVC,
      '--from',
      'shop/cart',
      '--to',
      'svc:payments/nope',
      '--port',
      '80',
    );
    expect(missing.stderr).toContain('svc:payments/nope: no such Service');
    const dir = mkdtempSync(join(tmpdir(), 'svc-bad-'));
    writeFileSync(
      join(dir, 'bad.yaml'),
      'apiVersion: v1\nkind: Service\nmetadata: {name: bad, namespace: shop}\nspec: {clusterIP: 10.96.0.99, ports: [{port: 99999}]}\n',
    );
    const bad = await run('netpol', 'simulate', NP, join(dir, 'bad.yaml'));
    expect(bad.code).toBe(2); // an invalid object: reported, the rest answered
    expect(bad.stderr).toMatch(/bad\.yaml.*\(Service shop\/bad\): spec\.ports\[0\]\.port: 1-65535/);
  });
});
