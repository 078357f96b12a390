import { describe, expect, it } from 'vitest';
import type { Pod } from './model.ts';
import { type RecommendConnection, recommend, stableSelector } from './recommend.ts';

const pod = (
  ns: string,
  name: string,
  labels: Record<string, string>,
  ip: string,
  more: Partial<Pod> = {},
): Pod => ({
  namespace: ns,
  name,
  labels,
  ips: [ip],
  node: 'n1',
  ports: [],
  ...more,
});
const web1 = pod(
  'shop',
  'web-1',
  { 'app.kubernetes.io/name': 'web', 'pod-template-hash': 'a1' },
  '10.0.0.1',
  {
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  },
);
const web2 = pod(
  'shop',
  'web-2',
  { 'app.kubernetes.io/name': 'web', 'pod-template-hash': 'b2' },
  '10.0.0.2',
  {
    node: 'n2',
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  },
);
const cart = pod(
  'shop',
  'cart-0',
  { app: 'cart', 'statefulset.kubernetes.io/pod-name': 'cart-0' },
  '10.0.0.3',
  {
    ports: [{ name: 'http', port: 9000, protocol: 'TCP' }],
  },
);
const ledger = pod('payments', 'ledger-0', { app: 'ledger' }, '10.0.1.1');
const dns = pod('kube-system', 'coredns-x', { 'k8s-app': 'kube-dns', 'pod-template-hash': 'c' }, '10.0.2.1');
const PODS = [web1, web2, cart, ledger, dns];
const conn = (
  src: RecommendConnection['src'],
  dst: RecommendConnection['dst'],
  port: number,
  protocol: RecommendConnection['protocol'] = 'TCP',
): RecommendConnection => ({ src, dst, port, protocol, flows: 1 });

describe('stableSelector', () => {
  it('prefers app.kubernetes.io/{name,instance,component}, then part-of, app, k8s-app', () => {
    expect(
      stableSelector({
        'app.kubernetes.io/name': 'redis',
        'app.kubernetes.io/instance': 'cache',
        'app.kubernetes.io/component': 'replica',
        'app.kubernetes.io/version': '7.2',
        'app.kubernetes.io/part-of': 'shop',
        app: 'redis',
      }),
    ).toEqual({
      'app.kubernetes.io/name': 'redis',
      'app.kubernetes.io/instance': 'cache',
      'app.kubernetes.io/component': 'replica',
    });
    expect(stableSelector({ 'app.kubernetes.io/part-of': 'shop', app: 'x' })).toEqual({
      'app.kubernetes.io/part-of': 'shop',
    });
    expect(stableSelector({ app: 'cart', 'pod-template-hash': 'abc', tier: 'be' })).toEqual({ app: 'cart' });
    expect(stableSelector({ 'k8s-app': 'kube-dns', 'pod-template-hash': 'abc' })).toEqual({
      'k8s-app': 'kube-dns',
    });
  });

  it('falls back to every label but the per-revision and per-pod ones; none: undefined', () => {
    expect(
      stableSelector({
        tier: 'db',
        'pod-template-hash': 'x',
        'controller-revision-hash': 'y',
        'statefulset.kubernetes.io/pod-name': 'db-0',
        'apps.kubernetes.io/pod-index': '0',
        'my-hash': 'z',
      }),
    ).toEqual({ tier: 'db' });
    expect(stableSelector({ 'pod-template-hash': 'x' })).toBeUndefined();
    expect(stableSelector({})).toBeUndefined();
  });
});

describe('recommend', () => {
  it('one policy per workload, both ways; replicas grouped; other namespaces by their name label', () => {
    const r = recommend({
      namespace: 'shop',
      pods: PODS,
      connections: [
        conn({ pod: web1 }, { pod: cart }, 9000),
        conn({ pod: web2 }, { pod: cart }, 9000),
        conn({ pod: cart }, { pod: ledger }, 7443),
      ],
    });
    expect(r.recommendations.map((x) => x.policy.metadata.name)).toEqual([
      'recommended-cart',
      'recommended-web',
    ]);
    const [c, w] = r.recommendations.map((x) => x.policy);
    expect(c!.spec.podSelector).toEqual({ matchLabels: { app: 'cart' } });
    expect(c!.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    // web's two replicas are one peer; the port is named, as cart names it
    expect(c!.spec.ingress).toEqual([
      {
        from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'web' } } }],
        ports: [{ protocol: 'TCP', port: 'http' }],
      },
    ]);
    expect(c!.spec.egress![0]).toEqual({
      to: [
        {
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'payments' } },
          podSelector: { matchLabels: { app: 'ledger' } },
        },
      ],
      ports: [{ protocol: 'TCP', port: 7443 }], // ledger names no port
    });
    expect(w!.spec.podSelector).toEqual({ matchLabels: { 'app.kubernetes.io/name': 'web' } });
    expect(w!.spec.ingress).toEqual([]); // nothing reached web: isolated
    expect(w!.spec.egress![0]).toEqual({
      to: [{ podSelector: { matchLabels: { app: 'cart' } } }],
      ports: [{ protocol: 'TCP', port: 'http' }],
    });
    expect(r.recommendations[1]!.pods).toEqual(['shop/web-1', 'shop/web-2']);
  });

  it('keeps DNS (observed DNS folded into it), and --no-dns leaves it out', () => {
    const connections = [
      conn({ pod: web1 }, { pod: dns }, 53, 'UDP'),
      conn({ pod: web1 }, { pod: dns }, 9153),
    ];
    const [w] = recommend({ namespace: 'shop', pods: PODS, connections }).recommendations;
    expect(w!.policy.spec.egress).toEqual([
      {
        to: [
          {
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
            podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
          },
        ],
        ports: [{ protocol: 'TCP', port: 9153 }], // not DNS: kept as seen
      },
      {
        to: [
          {
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
            podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
          },
        ],
        ports: [
          { protocol: 'UDP', port: 53 },
          { protocol: 'TCP', port: 53 },
        ],
      },
    ]);
    const [n] = recommend({ namespace: 'shop', pods: PODS, connections, dns: false }).recommendations;
    expect(n!.policy.spec.egress).toEqual([
      {
        to: [
          {
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
            podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
          },
        ],
        ports: [
          { protocol: 'TCP', port: 9153 },
          { protocol: 'UDP', port: 53 },
        ],
      },
    ]);
  });

  it('names a port only when every pod that answers names it the same', () => {
    const web3 = { ...web2, name: 'web-3', ports: [{ name: 'web', port: 8080, protocol: 'TCP' as const }] };
    const r = recommend({
      namespace: 'shop',
      pods: [web1, web3, cart],
      connections: [conn({ pod: cart }, { pod: web1 }, 8080)],
    });
    const w = r.recommendations.find((x) => x.policy.metadata.name === 'recommended-web')!;
    expect(w.policy.spec.ingress![0]!.ports).toEqual([{ protocol: 'TCP', port: 8080 }]);
    // UDP 8080 is another port: never named by a TCP name
    const u = recommend({
      namespace: 'shop',
      pods: [web1, cart],
      connections: [conn({ pod: cart }, { pod: web1 }, 8080, 'UDP')],
    });
    expect(
      u.recommendations.find((x) => x.policy.metadata.name === 'recommended-web')!.policy.spec.ingress![0]!
        .ports,
    ).toEqual([{ protocol: 'UDP', port: 8080 }]);
  });

  it('addresses are /32 or /128 ipBlocks; peers sharing a port list share a rule; its own node is no rule', () => {
    const r = recommend({
      namespace: 'shop',
      pods: PODS,
      connections: [
        conn({ address: '203.0.113.7' }, { pod: web1 }, 8080),
        conn({ address: '2001:db8::7' }, { pod: web1 }, 8080),
        conn({ pod: cart }, { pod: web1 }, 8080),
        conn({ address: '192.168.0.1', node: 'n1' }, { pod: web1 }, 8080), // kubelet on web-1's node
      ],
      dns: false,
    });
    const w = r.recommendations.find((x) => x.policy.metadata.name === 'recommended-web')!;
    expect(w.policy.spec.ingress).toEqual([
      {
        from: [
          { ipBlock: { cidr: '2001:db8::7/128' } },
          { ipBlock: { cidr: '203.0.113.7/32' } },
          { podSelector: { matchLabels: { app: 'cart' } } },
        ],
        ports: [{ protocol: 'TCP', port: 'http' }],
      },
    ]);
    expect(r.notes).toContain(
      "1 connection(s) with a pod's own node need no rule: a NetworkPolicy never blocks them",
    );
  });

  it("another node's address leaves that direction unisolated, said (no ipBlock matches a node)", () => {
    const r = recommend({
      namespace: 'shop',
      pods: PODS,
      connections: [
        conn({ address: '192.168.0.2', node: 'n2' }, { pod: web1 }, 8080),
        conn({ pod: web1 }, { pod: cart }, 9000),
        // both directions with other nodes: no policy at all for cart
        conn({ pod: cart }, { address: '192.168.0.2', node: 'n2' }, 6443),
        conn({ address: '192.168.0.2', node: 'n2' }, { pod: cart }, 9000),
      ],
      dns: false,
    });
    expect(r.recommendations.map((x) => x.policy.metadata.name)).toEqual(['recommended-web']);
    const w = r.recommendations[0]!.policy.spec;
    expect(w.policyTypes).toEqual(['Egress']);
    expect(w.ingress).toBeUndefined();
    const notes = r.notes.join('\n');
    expect(notes).toMatch(
      /shop\/web: ingress left unisolated: it was seen with 192\.168\.0\.2 \(node n2\) TCP\/8080, another node's address/,
    );
    expect(notes).toMatch(/shop\/cart: egress left unisolated: .*TCP\/6443/);
    expect(notes).toMatch(/shop\/cart: ingress left unisolated/);
  });

  it('a pod with no labels gets no policy and, as a peer, its whole namespace; quiet workloads are named', () => {
    const bare = pod('shop', 'loadgen', { 'pod-template-hash': 'x' }, '10.0.0.9');
    const r = recommend({
      namespace: 'shop',
      pods: [...PODS, bare],
      connections: [conn({ pod: bare }, { pod: cart }, 9000), conn({ pod: cart }, { pod: bare }, 1234)],
      dns: false,
    });
    expect(r.recommendations.map((x) => x.policy.metadata.name)).toEqual(['recommended-cart']);
    expect(r.recommendations[0]!.policy.spec.ingress).toEqual([
      { from: [{ podSelector: {} }], ports: [{ protocol: 'TCP', port: 'http' }] },
    ]);
    expect(r.notes.join('\n')).toMatch(
      /shop\/loadgen: has no labels a selector can pick it by: no policy written/,
    );
    expect(r.notes.join('\n')).toMatch(/shop\/web \(2 pod\(s\)\): no connection observed: no policy written/);
  });

  it('names are DNS labels, unique; the order of the connections changes nothing', () => {
    const a = pod('shop', 'a', { app: 'Web_Front!!' }, '10.0.0.11');
    const b = pod('shop', 'b', { app: 'web-front' }, '10.0.0.12');
    const conns = [
      conn({ pod: a }, { pod: b }, 80),
      conn({ pod: b }, { pod: a }, 81),
      conn({ pod: a }, { address: '1.1.1.1' }, 443),
    ];
    const r = recommend({ namespace: 'shop', pods: [a, b], connections: conns });
    expect(r.recommendations.map((x) => x.policy.metadata.name)).toEqual([
      'recommended-web-front',
      'recommended-web-front-2',
    ]);
    const again = recommend({ namespace: 'shop', pods: [b, a], connections: [...conns].reverse() });
    expect(JSON.stringify(again.recommendations)).toBe(JSON.stringify(r.recommendations));
  });
});
