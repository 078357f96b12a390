// Golden tests of the netpol commands on examples/netpol; expectations follow from the policies in
// the example files (see the comments there), not from captured output.
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { run } from './run.ts';

const NP = resolve(import.meta.dirname, '../../../examples/netpol');
const PROBES = resolve(import.meta.dirname, '../../../examples/probes/netpol.yaml');

describe('cascadectl netpol simulate', async () => {
  const r = await run('netpol', 'simulate', NP, '--probes', PROBES, '-o', 'json');
  const res = JSON.parse(r.stdout) as {
    from: string;
    to: string;
    port: number;
    verdict: string;
    egress?: { verdict: string; decidedBy: Record<string, unknown> };
    ingress?: { verdict: string; decidedBy: Record<string, unknown> };
  }[];
  const find = (from: string, to: string, port: number) =>
    res.find((x) => x.from === from && x.to === to && x.port === port)!;

  it('exits 0 with one result per probe', () => {
    expect(r.code).toBe(0);
    expect(res).toHaveLength(13);
  });

  it('dev never reaches prod: the ANP deny at ingress decides', () => {
    expect(find('sandbox/toy', 'shop/cart', 9000)).toMatchObject({
      verdict: 'deny',
      ingress: {
        verdict: 'deny',
        decidedBy: {
          tier: 'admin',
          policy: 'AdminNetworkPolicy/dev-never-reaches-prod',
          rule: 'deny-dev',
          priority: 20,
        },
      },
    });
  });

  it('cart may call the ledger on its named gRPC port: admin Allow beats the namespace deny', () => {
    expect(find('shop/cart', 'payments/ledger', 7443)).toMatchObject({
      verdict: 'allow',
      egress: {
        verdict: 'allow',
        decidedBy: { tier: 'networkpolicy', policy: 'NetworkPolicy/shop/cart-from-web' },
      },
      ingress: { verdict: 'allow', decidedBy: { tier: 'admin', rule: 'shop-to-ledger-grpc', priority: 10 } },
    });
    expect(find('shop/web', 'payments/ledger', 7443)).toMatchObject({
      verdict: 'deny',
      ingress: { decidedBy: { rule: 'deny-everyone-else' } },
    });
  });

  it('monitoring is passed to the ledger NetworkPolicy: 9090 allowed, 7443 isolated', () => {
    expect(find('monitoring/prometheus', 'payments/ledger', 9090)).toMatchObject({
      verdict: 'allow',
      ingress: {
        decidedBy: {
          tier: 'networkpolicy',
          policy: 'NetworkPolicy/payments/ledger-metrics',
          passedBy: ['AdminNetworkPolicy/protect-sensitive#ingress[0]'],
        },
      },
    });
    expect(find('monitoring/prometheus', 'payments/ledger', 7443)).toMatchObject({
      verdict: 'deny',
      ingress: { decidedBy: { tier: 'networkpolicy', rule: 'isolation' } },
    });
  });

  it('ipBlock except, the BANP internet baseline, and the own-node exception', () => {
    expect(find('shop/cart', '203.0.113.10', 443).verdict).toBe('allow');
    expect(find('shop/cart', '203.0.113.200', 443)).toMatchObject({
      verdict: 'deny',
      egress: { decidedBy: { tier: 'networkpolicy', rule: 'isolation' } },
    });
    expect(find('shop/web', '8.8.8.8', 53)).toMatchObject({
      verdict: 'deny',
      egress: { decidedBy: { tier: 'baseline', rule: 'no-internet' } },
    });
    // a NetworkPolicy isolating cart's egress cannot block its own node (node-b), only the others;
    // web's egress is not isolated: nothing in the admin tier or the baseline names nodes
    expect(find('shop/cart', '192.168.10.2', 10250)).toMatchObject({
      verdict: 'allow',
      egress: { decidedBy: { tier: 'node' } },
    });
    expect(find('shop/cart', '192.168.10.1', 10250)).toMatchObject({
      verdict: 'deny',
      egress: { decidedBy: { tier: 'networkpolicy', rule: 'isolation' } },
    });
    expect(find('shop/web', '192.168.10.1', 10250)).toMatchObject({
      verdict: 'allow',
      egress: { decidedBy: { tier: 'default' } },
    });
  });

  it('without probes prints the truth table of every pod pair per port in use', async () => {
    const t = JSON.parse((await run('netpol', 'simulate', NP, '-o', 'json')).stdout) as {
      port: string;
      rows: string[][];
    }[];
    const grpc = t.find((x) => x.port === 'TCP/7443')!;
    const col = grpc.rows[0]!.indexOf('payments/ledger');
    const row = (name: string) => grpc.rows.find((r) => r[0] === name)!;
    expect(row('shop/cart')[col]).toBe('.');
    expect(row('shop/web')[col]).toBe('X');
    expect(row('payments/ledger')[col]).toBe('.'); // itself
  });
});

describe('cascadectl netpol explain and maps', () => {
  it('explain names the rules in order, the decider and the enforcing entry', async () => {
    const r = await run(
      'netpol',
      'explain',
      NP,
      '--from',
      'monitoring/prometheus',
      '--to',
      'payments/ledger',
      '--port',
      '9090',
    );
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(
      'ingress at payments/ledger: ALLOW by networkpolicy NetworkPolicy/payments/ledger-metrics ingress[0]',
    );
    expect(r.stdout).toContain('passed by AdminNetworkPolicy/protect-sensitive#ingress[0]');
    expect(r.stdout).toMatch(/admin layer pass entry monitoring\/\{app=prometheus\}#\d+ any -> pass/);
    expect(r.stdout).toContain('=> ALLOW');
  });

  it("explain says when the remote pod's label set is past its namespace's identity cap", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cascadectl-cap-'));
    try {
      cpSync(NP, dir, { recursive: true });
      // an older label set in monitoring: with a cap of 1, prometheus's is the one left out
      writeFileSync(
        join(dir, '30-older.yaml'),
        'apiVersion: v1\nkind: Pod\nmetadata: { name: agent, namespace: monitoring, labels: { app: aaa } }\nspec: { nodeName: node-1, containers: [{ name: a }] }\nstatus: { phase: Running, podIP: 10.0.9.9, podIPs: [{ ip: 10.0.9.9 }] }\n',
      );
      const explain = () =>
        run(
          'netpol',
          'explain',
          dir,
          '--from',
          'monitoring/prometheus',
          '--to',
          'payments/ledger',
          '--port',
          '9090',
        );
      expect((await explain()).stdout).toContain('=> ALLOW');
      process.env.CASCADE_FOREIGN_IDENTITY_CAP = '1';
      const r = await explain();
      expect(r.stdout).toContain('ingress at payments/ledger: DENY by networkpolicy');
      expect(r.stdout).toContain(
        "note: monitoring/prometheus's label set is past namespace monitoring's identity cap (1 label set, the oldest first)",
      );
      expect(r.stdout).toContain('=> DENY');
      // the agents' tenant label (CASCADE_TENANT_LABEL): the cap is shared by the namespaces that
      // share its value; with none configured each namespace has its own
      process.env.CASCADE_TENANT_LABEL = '';
      expect((await explain()).stdout).toContain('=> DENY');
      process.env.CASCADE_TENANT_LABEL = 'team name';
      const bad = await explain();
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('CASCADE_TENANT_LABEL: "team name" is not a label key');
      delete process.env.CASCADE_TENANT_LABEL;
      process.env.CASCADE_FOREIGN_IDENTITY_CAP = 'many';
      expect((await explain()).code).toBe(2);
    } finally {
      delete process.env.CASCADE_FOREIGN_IDENTITY_CAP;
      delete process.env.CASCADE_TENANT_LABEL;
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('maps lists both layers of an endpoint with decoded entries', async () => {
    const r = await run('netpol', 'maps', NP, '--endpoint', 'shop/cart', '-o', 'json');
    type Layer = {
      bpfTable: number;
      entries: string[];
      bpf: { key: string; value: string; decoded: string }[];
    };
    const m = JSON.parse(r.stdout) as {
      summary: {
        endpoints: number;
        entries: number;
        bpf: { policyEntries: number; endpointEntries: number };
      };
      endpoints: {
        endpoint: string;
        bpfEndpoint: string;
        directions: { direction: string; admin: Layer; lower: Layer }[];
      }[];
    };
    expect(m.summary.endpoints).toBe(5);
    // Every MapState entry is one policy map entry; every pod one endpoints entry.
    expect(m.summary.bpf.policyEntries).toBe(m.summary.entries);
    expect(m.summary.bpf.endpointEntries).toBe(5);
    const cart = m.endpoints[0]!;
    const egress = cart.directions.find((d) => d.direction === 'egress')!;
    const ingress = cart.directions.find((d) => d.direction === 'ingress')!;
    expect(egress.lower.entries.some((e) => e.startsWith('any any -> deny [np-isolation deny'))).toBe(true);
    const i = egress.lower.entries.findIndex((e) => /^cidr:203\.0\.113\.0\/24#\d+ TCP\/443 -> allow/.test(e));
    expect(i).toBeGreaterThanOrEqual(0);
    // The same entry in the kernel's terms: LPM prefixlen 64 + 8 (proto) + 16 (exact port) = 88 = 0x58,
    // the endpoint's egress lower table, TCP (06), port 443 (01bb, network order).
    const b = egress.lower.bpf[i]!;
    const table = egress.lower.bpfTable;
    const le = Buffer.alloc(4);
    le.writeUInt32LE(table);
    expect(b.key.slice(0, 16)).toBe(`58000000${le.toString('hex')}`);
    expect(b.key.slice(24)).toBe('0601bb');
    expect(b.decoded).toMatch(
      /proto 6 port 443\/16\] = allow, .* rule #\d+ \(NetworkPolicy\/shop\/cart-from-web#egress\[1\]\)/,
    );
    // The endpoints map entry points at the same four tables.
    expect(cart.bpfEndpoint).toContain(
      `ingress tables admin ${ingress.admin.bpfTable} lower ${ingress.lower.bpfTable}, egress tables admin ${egress.admin.bpfTable} lower ${egress.lower.bpfTable}`,
    );
  });

  it('bad flags and unknown pods exit 2 with a message', async () => {
    expect(
      (await run('netpol', 'explain', NP, '--from', 'a/b', '--to', 'shop/web', '--port', '80')).stderr,
    ).toContain('"a/b" is neither an address nor a known pod');
    expect((await run('netpol', 'simulate', NP, '--probes', '/nonexistent.yaml')).code).toBe(2);
    expect((await run('netpol', 'maps', NP, '--endpoint', 'no/such')).code).toBe(2);
  });
});

describe('cascadectl lint', () => {
  const GW = resolve(import.meta.dirname, '../../../examples/gateway');
  it('flags the refused unset of an override and the NetworkPolicy rule the ANP made dead', async () => {
    const r = await run('lint', GW, NP, '-o', 'json');
    expect(r.code).toBe(0);
    // payments/ledger-from-shop allows the shop namespace (web, cart) on every port to the ledger;
    // protect-sensitive decides all of it first: cart's grpc port is allowed by
    // shop-to-ledger-grpc, everything else is denied by deny-everyone-else.
    expect(JSON.parse(r.stdout)).toEqual([
      {
        severity: 'warning',
        kind: 'AuthPolicy',
        object: 'AuthPolicy team-d/admin-open',
        namespace: 'team-d',
        message:
          'unset of authorization.deny-anonymous has no effect: it is an override of infra/platform-auth',
      },
      {
        severity: 'warning',
        kind: 'NetworkPolicy',
        object: 'NetworkPolicy/payments/ledger-from-shop',
        namespace: 'payments',
        message: expect.stringMatching(
          /^NetworkPolicy\/payments\/ledger-from-shop#ingress\[0\] is dead: all \d+ connections it would allow are decided first by AdminNetworkPolicy\/protect-sensitive#deny-everyone-else \(deny, \d+\), AdminNetworkPolicy\/protect-sensitive#shop-to-ledger-grpc \(allow, 1\)$/,
        ),
      },
    ]);
  });
});

describe('ClusterNetworkPolicy in either served version', () => {
  const cnp = (apiVersion: string, network: string) => `apiVersion: ${apiVersion}
kind: ClusterNetworkPolicy
metadata: { name: let-sandbox-in }
spec:
  tier: Admin
  priority: 1
  subject: { namespaces: { matchLabels: { kubernetes.io/metadata.name: shop } } }
  ingress:
    - { name: from-sandbox, action: Accept, from: [{ namespaces: { matchLabels: { kubernetes.io/metadata.name: sandbox } } }] }
  egress:
    - { name: not-there, action: Deny, to: [{ networks: ["${network}"] }] }
`;
  const simulate = async (doc: string) => {
    const dir = mkdtempSync(join(tmpdir(), 'cnp-'));
    try {
      cpSync(NP, dir, { recursive: true });
      writeFileSync(join(dir, '90-cnp.yaml'), doc);
      writeFileSync(
        join(dir, 'probes.yaml'),
        '- {from: sandbox/toy, to: shop/cart, protocol: TCP, port: 9000}\n',
      );
      return await run(
        'netpol',
        'simulate',
        join(dir, '90-cnp.yaml'),
        ...['00-cluster.yaml', '10-admin.yaml', '20-namespaces.yaml'].map((f) => join(dir, f)),
        '--probes',
        join(dir, 'probes.yaml'),
        '-o',
        'json',
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };

  it('v1beta1 (network-policy-api v0.3) and v1alpha2 read alike: the Admin tier Accept decides', async () => {
    const beta = await simulate(cnp('policy.networking.k8s.io/v1beta1', '203.0.113.0/24'));
    const alpha = await simulate(cnp('policy.networking.k8s.io/v1alpha2', '203.0.113.0/24'));
    expect([beta.code, beta.stderr]).toEqual([0, '']);
    expect(JSON.parse(beta.stdout)).toEqual(JSON.parse(alpha.stdout));
    expect(JSON.parse(beta.stdout)[0]).toMatchObject({
      verdict: 'allow',
      ingress: { decidedBy: { policy: 'ClusterNetworkPolicy/let-sandbox-in', rule: 'from-sandbox' } },
    });
  });

  it('another version is refused naming the field; a network with host bits set is warned about', async () => {
    const bad = await simulate(cnp('policy.networking.k8s.io/v1', '203.0.113.0/24'));
    expect(bad.stderr).toContain(
      'apiVersion: "policy.networking.k8s.io/v1" is not policy.networking.k8s.io/v1beta1 or policy.networking.k8s.io/v1alpha2',
    );
    const masked = await simulate(cnp('policy.networking.k8s.io/v1beta1', '203.0.113.9/24'));
    expect(masked.stderr).toContain(
      'spec.egress[0].to[0].networks[0]: "203.0.113.9/24" has host bits set, which ClusterNetworkPolicy v1beta1 refuses',
    );
  });
});
