// One tenant's Services against everyone's (round-two review, item 3), on the real program: a namespace
// that sorts first creates 330 ClusterIP Services of 100 ports (33,000 frontends, more than the node's
// 32,768). Before, frontends were taken cluster-wide in namespace/name order, so kube-system's DNS and
// payments were left untranslated, and a flow to a left-out ClusterIP was judged as the world: the
// admin Deny sandbox -> payments became a pass. Now each namespace has a budget, kube-system is served
// first, the flood alone is refused, and a flow to a refused ClusterIP is dropped.
import { freshDatapath, kernelTestsEnabled, kernelVerdict } from '@cascade/bpf-datapath/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NetpolEngine } from '../engine/engine.ts';
import type { NetPolicyObject } from '../engine/model.ts';
import { applyServiceBudget, DEFAULT_SERVICE_BUDGET } from '../engine/service-budget.ts';
import { ServiceCatalog } from '../engine/services.ts';
import { datapathState } from './datapath.ts';

const CLIENT = '10.0.0.1'; // sandbox/client
const API = '10.0.0.2'; // payments/api
const DNS = '10.0.0.3'; // kube-system/coredns
const FLOODER = '10.0.0.9'; // aaa-flood/web
const DNS_VIP = '10.96.0.10';
const PAY_VIP = '10.96.1.1';
const floodVip = (i: number) => `10.97.${Math.floor(i / 250)}.${(i % 250) + 1}`;

const pod = (namespace: string, name: string, ip: string) => ({
  namespace,
  name,
  labels: { app: name },
  ips: [ip],
  node: 'n1',
  ports: [],
});
const adminDeny: NetPolicyObject = {
  kind: 'AdminNetworkPolicy',
  name: 'sandbox-never-reaches-payments',
  spec: {
    priority: 10,
    subject: { namespaces: { matchLabels: { 'kubernetes.io/metadata.name': 'sandbox' } } },
    egress: [
      {
        name: 'deny-payments',
        action: 'Deny',
        to: [{ namespaces: { matchLabels: { 'kubernetes.io/metadata.name': 'payments' } } }],
      },
    ],
  },
};

function catalog(): ServiceCatalog {
  const c = new ServiceCatalog();
  const svc = (
    namespace: string,
    name: string,
    vip: string,
    ports: { port: number; protocol?: string }[],
  ) => {
    const named = ports.map((p, i) => ({ ...p, name: ports.length > 1 ? `p${i}` : '' }));
    const error = c.apply('Service', {
      metadata: { name, namespace },
      spec: { clusterIP: vip, clusterIPs: [vip], ports: named },
    });
    if (error) throw new Error(error);
  };
  const backends = (namespace: string, name: string, addr: string, port: number, protocol = 'TCP') =>
    c.apply('EndpointSlice', {
      metadata: { name: `${name}-1`, namespace, labels: { 'kubernetes.io/service-name': name } },
      addressType: 'IPv4',
      ports: [{ name: '', port, protocol }],
      endpoints: [{ addresses: [addr], conditions: { ready: true }, nodeName: 'n1' }],
    } as never);
  // the flood: 330 Services of 100 ports, in a namespace that sorts before everyone else
  for (let i = 0; i < 330; i++) {
    const name = `s${String(i).padStart(3, '0')}`;
    svc(
      'aaa-flood',
      name,
      floodVip(i),
      Array.from({ length: 100 }, (_, p) => ({ port: 1000 + p })),
    );
  }
  svc('kube-system', 'kube-dns', DNS_VIP, [{ port: 53, protocol: 'UDP' }]);
  backends('kube-system', 'kube-dns', DNS, 53, 'UDP');
  svc('payments', 'api', PAY_VIP, [{ port: 443 }]);
  backends('payments', 'api', API, 443);
  return c;
}

describe('Service budgets per namespace', () => {
  it('the flood is refused alone: kube-system first, payments kept, the flood within its budget', () => {
    const c = catalog();
    const refused = c.refused('n1');
    const namespaces = new Set(refused.map((r) => r.namespace));
    expect([...namespaces]).toEqual(['aaa-flood']);
    // 2048 frontends: 20 Services of 100 ports fit, the other 310 do not
    expect(refused).toHaveLength(310);
    expect(refused[0]!.reason).toMatch(
      /namespace aaa-flood is over its Service budget on this node \(2048 frontends/,
    );
    const admitted = new Set(c.desired('n1').map((d) => d.name?.split(':')[0]));
    expect(admitted.has('kube-system/kube-dns')).toBe(true);
    expect(admitted.has('payments/api')).toBe(true);
    expect(c.untranslated('n1')).toContain(floodVip(329));
    expect(c.untranslated('n1')).not.toContain(DNS_VIP);
  });

  it('reserved namespaces come first and have no namespace budget; full maps refuse what is left', () => {
    const f = (key: string, n: number) =>
      Array.from({ length: n }, (_, i) => ({
        service: `${key}:${i}`,
        key,
        addr: `10.96.${n}.${i % 250}`,
        port: 1000 + i,
        proto: 6,
        nodePort: false,
        backends: [],
      }));
    const all = [...f('a/one', 30), ...f('kube-system/dns', 40), ...f('z/two', 30)];
    const r = applyServiceBudget(
      all,
      { ...DEFAULT_SERVICE_BUDGET, frontends: 35 },
      { frontends: 80, backends: 1000 },
    );
    expect(r.admitted.map((x) => x.key)).toEqual([
      ...Array(40).fill('kube-system/dns'),
      ...Array(30).fill('a/one'),
    ]);
    expect(r.refused.map((x) => [x.service, x.reason.slice(0, 30)])).toEqual([
      ['z/two', "the node's Service maps are fu"],
    ]);
  });
});

describe.skipIf(!kernelTestsEnabled())('a refused Service fails closed in the kernel', () => {
  let dp: Awaited<ReturnType<typeof freshDatapath>>;
  beforeAll(async () => {
    dp = await freshDatapath();
  });
  afterAll(async () => dp?.cleanup());

  it('DNS and payments are translated and judged by their backends; a refused ClusterIP is dropped', async () => {
    const engine = NetpolEngine.fromCluster({
      namespaces: ['aaa-flood', 'kube-system', 'payments', 'sandbox'].map((name) => ({
        name,
        labels: { 'kubernetes.io/metadata.name': name },
      })),
      nodes: [{ name: 'n1', labels: {}, ips: ['192.0.2.1'] }],
      pods: [
        pod('sandbox', 'client', CLIENT),
        pod('payments', 'api', API),
        pod('kube-system', 'coredns', DNS),
        pod('aaa-flood', 'web', FLOODER),
      ],
      policies: [adminDeny],
    });
    const services = catalog();
    const report = await dp.dp.sync(datapathState(engine, 'n1', { services }));
    expect(report.refused).toEqual([]);
    const egress = (dst: string, proto: number, dport: number, sport: number) =>
      kernelVerdict(dp.dp, 'egress', { src: CLIENT, dst, proto, sport, dport });
    // kube-system's DNS: translated (before, cut by the flood) and allowed
    expect(await egress(DNS_VIP, 17, 53, 40001)).toBe('allow');
    // payments: translated and judged by its backend: the admin Deny holds (before: a pass as world)
    expect(await egress(PAY_VIP, 6, 443, 40002)).toBe('deny');
    // a refused flood ClusterIP: a new flow is dropped, not judged as the world
    expect(await egress(floodVip(300), 6, 1000, 40003)).toBe('deny');
    // one the flood's budget admits is translated as usual (no backends: kube-proxy answers)
    expect(await egress(floodVip(0), 6, 1000, 40004)).toBe('allow');
    // an address no Service has is still the world
    expect(await egress('10.98.0.1', 6, 1000, 40005)).toBe('allow');
  });
});
