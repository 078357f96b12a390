import { describe, expect, it } from 'vitest';
import { ServiceCatalog, serviceFromObject, sliceFromObject } from './services.ts';

const service = (name: string, spec: Record<string, unknown>, namespace = 'app') => ({
  metadata: { name, namespace },
  spec,
});
const slice = (
  name: string,
  svc: string,
  endpoints: Record<string, unknown>[],
  ports: Record<string, unknown>[] = [{ name: 'http', port: 8080, protocol: 'TCP' }],
  addressType = 'IPv4',
) => ({
  metadata: { name, namespace: 'app', labels: { 'kubernetes.io/service-name': svc } },
  addressType,
  ports,
  endpoints,
});
const ep = (addr: string, conditions: Record<string, unknown> = {}, nodeName = 'n1', pod = addr) => ({
  addresses: [addr],
  conditions,
  nodeName,
  targetRef: { kind: 'Pod', namespace: 'app', name: `pod-${pod}` },
});

describe('Services and EndpointSlices -> datapath frontends', () => {
  it('ClusterIP and NodePort frontends with the ready endpoints of the matching port name', () => {
    const c = new ServiceCatalog();
    expect(
      c.apply(
        'Service',
        service('web', {
          type: 'NodePort',
          clusterIP: '10.96.0.50',
          clusterIPs: ['10.96.0.50'],
          ports: [
            { name: 'http', port: 80, targetPort: 8080, nodePort: 30080 },
            { name: 'metrics', port: 9090, protocol: 'TCP' },
          ],
        }),
      ),
    ).toBeUndefined();
    c.apply(
      'EndpointSlice',
      slice('web-1', 'web', [
        ep('10.244.0.5'),
        ep('10.244.0.6', { ready: false }),
        ep('10.244.1.7', {}, 'n2'),
      ]),
    );
    const f = c.frontends();
    expect(
      f.map((x) => [x.service, x.addr, x.port, x.proto, x.backends.map((b) => `${b.addr}:${b.port}`)]),
    ).toEqual([
      ['app/web:http', '10.96.0.50', 80, 6, ['10.244.0.5:8080', '10.244.1.7:8080']],
      ['app/web:http', '0.0.0.0', 30080, 6, ['10.244.0.5:8080', '10.244.1.7:8080']],
      ['app/web:metrics', '10.96.0.50', 9090, 6, []],
    ]);
    expect(f[0]!.backends[0]).toMatchObject({ pod: 'app/pod-10.244.0.5', node: 'n1' });
    expect(c.desired('n1')[0]).toEqual({
      addr: '10.96.0.50',
      port: 80,
      proto: 6,
      name: 'app/web:http',
      backends: [
        { addr: '10.244.0.5', port: 8080 },
        { addr: '10.244.1.7', port: 8080 },
      ],
    });
  });

  it('no ready endpoint: serving and terminating ones (as kube-proxy); internalTrafficPolicy Local: the node only', () => {
    const c = new ServiceCatalog();
    c.apply(
      'Service',
      service('db', {
        clusterIPs: ['10.96.0.60'],
        ports: [{ name: 'http', port: 80 }],
        internalTrafficPolicy: 'Local',
      }),
    );
    c.apply(
      'EndpointSlice',
      slice('db-1', 'db', [
        ep('10.244.0.8', { ready: false, serving: true, terminating: true }),
        ep('10.244.1.9', { ready: false, serving: true, terminating: true }, 'n2'),
        ep('10.244.0.10', { ready: false, serving: false, terminating: true }),
      ]),
    );
    expect(c.desired('n1')[0]!.backends).toEqual([{ addr: '10.244.0.8', port: 8080 }]);
    expect(c.desired('n2')[0]!.backends).toEqual([{ addr: '10.244.1.9', port: 8080 }]);
    expect(c.desired()[0]!.backends).toHaveLength(2); // offline: every node
  });

  it('dual stack: each ClusterIP gets the endpoints of its family', () => {
    const c = new ServiceCatalog();
    c.apply(
      'Service',
      service('ds', { clusterIPs: ['10.96.0.70', 'fd00:96::70'], ports: [{ name: 'http', port: 80 }] }),
    );
    c.apply('EndpointSlice', slice('ds-4', 'ds', [ep('10.244.0.11')]));
    c.apply('EndpointSlice', slice('ds-6', 'ds', [ep('fd00:244::11')], undefined, 'IPv6'));
    expect(c.frontends().map((f) => [f.addr, f.backends.map((b) => b.addr)])).toEqual([
      ['10.96.0.70', ['10.244.0.11']],
      ['fd00:96::70', ['fd00:244::11']],
    ]);
  });

  it('headless and ExternalName Services need nothing; FQDN slices and slices of no Service are ignored', () => {
    expect(serviceFromObject(service('h', { clusterIP: 'None', ports: [{ port: 80 }] }))).toBeUndefined();
    expect(
      serviceFromObject(service('x', { type: 'ExternalName', externalName: 'example.com' })),
    ).toBeUndefined();
    expect(sliceFromObject(slice('f', 'svc', [], [], 'FQDN'))).toBeUndefined();
    expect(
      sliceFromObject({ metadata: { name: 'orphan' }, addressType: 'IPv4', endpoints: [] }),
    ).toBeUndefined();
  });

  it('bad input names the object and field and drops the object whole (its frontends go); others stay', () => {
    const c = new ServiceCatalog();
    c.apply('Service', service('good', { clusterIPs: ['10.96.0.80'], ports: [{ name: 'http', port: 80 }] }));
    c.apply('Service', service('bad', { clusterIPs: ['10.96.0.81'], ports: [{ name: 'http', port: 80 }] }));
    expect(c.frontends()).toHaveLength(2);
    expect(c.apply('Service', service('bad', { clusterIPs: ['10.96.0.81'], ports: [{ port: 70000 }] }))).toBe(
      'Service app/bad: spec.ports[0].port: 1-65535',
    );
    expect(c.apply('Service', service('bad2', { clusterIPs: ['not-an-ip'], ports: [{ port: 80 }] }))).toBe(
      'Service app/bad2: spec.clusterIPs[0]: not an IP address',
    );
    expect(
      c.apply(
        'Service',
        service('bad3', { clusterIPs: ['10.96.0.82'], ports: [{ port: 80, protocol: 'ICMP' }] }),
      ),
    ).toMatch(/spec.ports\[0\].protocol/);
    expect(c.apply('EndpointSlice', slice('s', 'good', [{ addresses: ['10.0.0.1; rm -rf /'] }]))).toBe(
      'EndpointSlice app/s: endpoints[0].addresses: not an IP address',
    );
    const many = Array.from({ length: 1001 }, (_, i) => ep(`10.1.${i >> 8}.${i & 255}`));
    expect(c.apply('EndpointSlice', slice('big', 'good', many))).toMatch(/endpoints: more than 1000/);
    expect(c.frontends().map((f) => f.service)).toEqual(['app/good:http']);
    // deleting removes
    c.apply('Service', service('good', {}), true);
    expect(c.frontends()).toEqual([]);
  });
});

describe('the datapath models what the catalog says', () => {
  it('for every frontend and source, the reference datapath over the encoded maps picks among the same backends', async () => {
    const { encodeServices, ReferenceDatapath } = await import('@cascade/bpf-datapath');
    const c = new ServiceCatalog();
    c.apply(
      'Service',
      service('a', {
        clusterIPs: ['10.96.1.1'],
        ports: [
          { name: 'http', port: 80 },
          { name: 'dns', port: 53, protocol: 'UDP' },
        ],
      }),
    );
    c.apply(
      'Service',
      service('b', {
        type: 'NodePort',
        clusterIPs: ['10.96.1.2'],
        ports: [{ name: 'http', port: 80, nodePort: 30001 }],
      }),
    );
    c.apply(
      'EndpointSlice',
      slice(
        'a-1',
        'a',
        [ep('10.244.0.1'), ep('10.244.0.2'), ep('10.244.0.3', { ready: false })],
        [
          { name: 'http', port: 8080, protocol: 'TCP' },
          { name: 'dns', port: 5353, protocol: 'UDP' },
        ],
      ),
    );
    c.apply('EndpointSlice', slice('b-1', 'b', [ep('10.244.0.1')]));
    const ref = new ReferenceDatapath({
      ipcache: [],
      hosts: [],
      endpoints: [],
      policy: [],
      ...encodeServices(c.desired('n1')),
    });
    for (const f of c.frontends('n1').filter((x) => !x.nodePort))
      for (const src of ['10.244.0.1', '10.244.0.9']) {
        const want = f.backends.filter((b) => b.addr !== src).map((b) => `${b.addr}:${b.port}`);
        const got = ref.serviceTarget(src, f.addr, f.proto, f.port);
        if (!f.backends.length) expect(got).toEqual({ kind: 'none' });
        else if (!want.length) expect(got).toEqual({ kind: 'self' });
        else
          expect(got.kind === 'backends' && got.backends.map((b) => `${b.addr}:${b.port}`).sort()).toEqual(
            want.sort(),
          );
      }
  });
});
