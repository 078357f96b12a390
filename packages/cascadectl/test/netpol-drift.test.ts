import { EP_FLAGS } from '@cascade/bpf-datapath';
import { datapathState, NetpolEngine } from '@cascade/netpolicy';
import { describe, expect, it } from 'vitest';
import { hostAddress, type LiveState, mapsDrift, modelHostCount } from '../src/commands/netpol-drift.ts';

const model = {
  ipcache: [
    { prefix: '10.0.0.1', identity: 300 },
    { prefix: '10.0.0.2', identity: 301 },
    { prefix: '0.0.0.0/0', identity: 2 },
  ],
  endpoints: [
    {
      ip: '10.0.0.1',
      identity: 300,
      flags: EP_FLAGS.ENFORCE_INGRESS,
      tables: [
        ['a', 'b'],
        ['c', 'd'],
      ],
      ifindex: 5,
    },
  ],
  tables: new Map(),
  services: [{ addr: '10.96.0.10', port: 53, proto: 17, backends: [{ addr: '10.0.0.2', port: 53 }] }],
} as never;
const live = (over: Partial<LiveState> = {}): LiveState => ({
  endpoints: [{ address: '10.0.0.1', identity: 9, flags: EP_FLAGS.ENFORCE_INGRESS, ifindex: 5 }],
  hosts: [
    { address: '10.0.0.1', identity: 9 },
    { address: '10.0.0.2', identity: 10 },
  ],
  services: [{ frontend: '10.96.0.10:53', proto: 17, backends: ['10.0.0.2:53'] }],
  policyEntries: 4,
  ...over,
});

describe('netpol maps --node: drift between the model and the kernel', () => {
  it("none when the kernel holds what the model says (identity numbers are the agent's own)", () => {
    expect(mapsDrift(model, live())).toEqual([]);
    // audited or judged by staged tables too: neither changes what is enforced
    const flags = EP_FLAGS.ENFORCE_INGRESS | EP_FLAGS.STAGED | EP_FLAGS.AUDIT_ALLOW;
    expect(
      mapsDrift(model, live({ endpoints: [{ address: '10.0.0.1', identity: 9, flags, ifindex: 5 }] })),
    ).toEqual([]);
  });

  it('names a missing, a stale and a fail-closed endpoint, hosts and Services that differ', () => {
    const drift = mapsDrift(
      model,
      live({
        endpoints: [
          {
            address: '10.0.0.1',
            identity: 9,
            flags: EP_FLAGS.ENFORCE_INGRESS | EP_FLAGS.FAIL_CLOSED,
            ifindex: 5,
          },
          { address: '10.0.0.9', identity: 11, flags: 0, ifindex: 6 },
        ],
        hosts: [{ address: '10.0.0.1', identity: 9 }],
        services: [{ frontend: '10.96.0.10:53', proto: 17, backends: [] }],
      }),
    );
    expect(drift).toEqual([
      'endpoint 10.0.0.1: enforces ingress+FAIL-CLOSED in the kernel, ingress in the model',
      'endpoint 10.0.0.9: in the kernel, not in the model (stale)',
      'host 10.0.0.2: the model knows it, the kernel does not',
      'Service 10.96.0.10:53/17: backends none in the kernel, 10.0.0.2:53 in the model',
    ]);
    expect(mapsDrift(model, live({ endpoints: [] }))[0]).toMatch(
      /^endpoint 10\.0\.0\.1: the model has it, the kernel does not/,
    );
  });

  it('reads the host prefixes the model really writes (with their length) as host addresses', () => {
    const engine = NetpolEngine.fromCluster({
      namespaces: [{ name: 'shop', labels: {} }],
      nodes: [{ name: 'n1', labels: {}, ips: ['192.0.2.2'] }],
      pods: [
        {
          namespace: 'shop',
          name: 'web',
          labels: { app: 'web' },
          ips: ['10.244.0.5', 'fd00::5'],
          node: 'n1',
          ports: [],
        },
      ],
      policies: [],
    });
    const m = datapathState(engine, 'n1');
    expect(m.ipcache.some((i) => i.prefix === '10.244.0.5/32')).toBe(true);
    const kernel = live({
      endpoints: [],
      hosts: [
        { address: '10.244.0.5', identity: 300 },
        { address: 'fd00::5', identity: 300 },
        { address: '192.0.2.2', identity: 1 },
      ],
      services: [],
    });
    expect(mapsDrift({ ...m, endpoints: [], services: [] }, kernel)).toEqual([]);
    expect(
      mapsDrift({ ...m, endpoints: [], services: [] }, { ...kernel, hosts: kernel.hosts.slice(1) }),
    ).toEqual(['host 10.244.0.5: the model knows it, the kernel does not']);
    // the summary counts them too (it said "model 0 host addresses" beside the kernel's 3: issue 41)
    expect(modelHostCount(m)).toBe(kernel.hosts.length);
    expect(hostAddress('10.0.0.0/8')).toBeUndefined();
    expect(hostAddress('fd00::1/128')).toBe('fd00::1');
  });
});
