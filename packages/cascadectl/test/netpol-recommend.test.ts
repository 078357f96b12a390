// `cascadectl netpol recommend` offline: policies from examples/recommend's flows, proved; the flow
// file as untrusted input (every field checked, bounded); the window; usage errors.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { FLOW_LIMITS } from '../src/commands/recommend-flows.ts';
import { run } from './run.ts';

const EX = resolve(import.meta.dirname, '../../../examples/recommend');
const CLUSTER = join(EX, 'cluster.yaml');
const FLOWS = join(EX, 'flows.ndjson');
const dir = mkdtempSync(join(tmpdir(), 'recommend-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};
/** `netpol recommend -n shop` on the example cluster, with more arguments. */
const shop = (...more: string[]) => run('netpol', 'recommend', '-n', 'shop', CLUSTER, ...more);
const flow = (o: Record<string, unknown>) =>
  JSON.stringify({
    time: new Date().toISOString(),
    direction: 'ingress',
    verdict: 'allow',
    from: 'monitoring/prometheus-0',
    to: 'shop/cart-0',
    protocol: 'TCP',
    port: 9000,
    ...o,
  });

describe('netpol recommend (offline)', () => {
  it('writes staged least-privilege policies and proves every observed connection allowed', async () => {
    const r = await shop('--flows', FLOWS);
    expect(r.code).toBe(0);
    const docs = parseAllDocuments(r.stdout).map((d) => d.toJS());
    expect(docs.map((d) => `${d.kind} ${d.metadata.name}`)).toEqual([
      'StagedNetworkPolicy recommended-cart',
      'StagedNetworkPolicy recommended-web-shop',
    ]);
    const web = docs[1];
    expect(web.apiVersion).toBe('cascade.dev/v1alpha1');
    expect(web.spec.stagedAction).toBe('Set');
    // replicas by their stable labels, never pod-template-hash or the version
    expect(web.spec.podSelector).toEqual({
      matchLabels: { 'app.kubernetes.io/name': 'web', 'app.kubernetes.io/instance': 'shop' },
    });
    // the ClusterIP flow became cart's backend on its named target port
    expect(web.spec.egress[0]).toEqual({
      to: [{ podSelector: { matchLabels: { app: 'cart' } } }],
      ports: [{ protocol: 'TCP', port: 'http' }],
    });
    // DNS kept
    expect(web.spec.egress[1].ports).toEqual([
      { protocol: 'UDP', port: 53 },
      { protocol: 'TCP', port: 53 },
    ]);
    expect(r.stderr).toMatch(/2 policies for shop from 11 flow record\(s\), 9 connection\(s\)/);
    expect(r.stderr).toMatch(/proof: 9 of 9 observed connection\(s\) allowed with the policies enforced/);
    expect(r.stderr).toMatch(
      /they also admit 2 pod pair\(s\).*\n {2}shop\/loadgen -> shop\/web-7d9f8b6c5-fghij TCP\/8080/,
    );
    expect(r.stderr).toMatch(/note: 1 ICMP flow record\(s\) left out/);
    expect(r.stderr).toMatch(
      /note: 1 connection\(s\) allowed by one end and denied by the other are no evidence/,
    );
    expect(r.stderr).toMatch(/note: shop\/loadgen: has no labels a selector can pick it by/);
  });

  it('--standard -o json: NetworkPolicies, the proof and the workloads', async () => {
    const r = await shop('--flows', FLOWS, '--standard', '-o', 'json');
    expect(r.code).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j.policies.map((p: { kind: string }) => p.kind)).toEqual(['NetworkPolicy', 'NetworkPolicy']);
    expect(j.policies[0].spec.stagedAction).toBeUndefined();
    expect(j.proof).toMatchObject({ connections: 9, allowed: 9, refused: [], beyondCount: 2 });
    expect(j.workloads[1]).toEqual({
      workload: 'shop/web-shop',
      policy: 'recommended-web-shop',
      pods: ['shop/web-7d9f8b6c5-abcde', 'shop/web-7d9f8b6c5-fghij'],
      connections: 6,
    });
  });

  it('its own output, simulated as staged policies, changes no observed connection', async () => {
    const out = file('recommended.yaml', (await shop('--flows', FLOWS)).stdout);
    const probes = file(
      'probes.yaml',
      [
        '- {from: 203.0.113.7, to: shop/web-7d9f8b6c5-abcde, protocol: TCP, port: 8080}',
        '- {from: shop/web-7d9f8b6c5-fghij, to: shop/cart-0, protocol: TCP, port: 9000}',
        '- {from: shop/cart-0, to: payments/ledger-0, protocol: TCP, port: 7443}',
        '- {from: monitoring/prometheus-0, to: shop/web-7d9f8b6c5-abcde, protocol: TCP, port: 9102}',
        // not observed: cart never reached prometheus (denied there), web never reached the ledger
        '- {from: shop/web-7d9f8b6c5-abcde, to: payments/ledger-0, protocol: TCP, port: 7443}',
      ].join('\n'),
    );
    const r = await run('netpol', 'simulate', CLUSTER, out, '--staged', '--probes', probes);
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n').filter((l) => / (ALLOW|DENY) /.test(l));
    expect(lines.slice(0, 4).every((l) => /ALLOW +=$/.test(l))).toBe(true);
    expect(lines[4]).toMatch(
      /ALLOW +DENY \(egress: networkpolicy StagedNetworkPolicy shop\/recommended-web-shop isolation\)/,
    );
  });

  it('refuses a bad flow file naming the file, the line and the field', async () => {
    const bad = file(
      'bad.ndjson',
      [
        flow({}),
        flow({ port: 70000 }),
        flow({ from: 'Shop/../x' }),
        flow({ to: '10.0.0.999' }),
        flow({ verdict: 'maybe' }),
        flow({ direction: 'sideways' }),
        flow({ time: 'yesterday' }),
        flow({ repeats: -1 }),
        flow({ protocol: 'T C P' }),
        '{"from": "shop/a", "to": "shop/b", "verdict": "allow", "direction": "egress", "protocol": "TCP", "port": 1.5}',
        '{not json',
        `{"x": "${'a'.repeat(FLOW_LIMITS.line)}"}`,
        'a plain log line is passed over',
        '{"level":"info","msg":"another log line, passed over"}',
      ].join('\n'),
    );
    const r = await shop('--flows', bad);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    const errors = r.stderr.trim().split('\n');
    expect(errors).toEqual([
      `error: ${bad}:2: port: not a port number (1-65535)`,
      `error: ${bad}:3: from: not a pod (namespace/name) or an address`,
      `error: ${bad}:4: to: not a pod (namespace/name) or an address`,
      `error: ${bad}:5: verdict: not allow or deny`,
      `error: ${bad}:6: direction: not ingress or egress`,
      `error: ${bad}:7: time: not an RFC 3339 time`,
      `error: ${bad}:8: repeats: not a count`,
      `error: ${bad}:9: protocol: not a protocol name`,
      `error: ${bad}:10: port: not a port number (1-65535)`,
      `error: ${bad}:11: not a JSON object`,
      `error: ${bad}:12: longer than ${FLOW_LIMITS.line} characters`,
    ]);
  });

  it('lists 20 errors of many, and counts the rest', async () => {
    const many = file('many.ndjson', Array.from({ length: 5000 }, () => flow({ port: 0 })).join('\n'));
    const r = await shop('--flows', many);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(21);
    expect(r.stderr).toMatch(/error: \.\.\. and 4980 more/);
  });

  it('--since keeps the window; nothing seen says why, exit 1', async () => {
    const old = new Date(Date.now() - 3 * 3600e3).toISOString();
    const f = file(
      'window.ndjson',
      [
        flow({ time: old, from: 'payments/ledger-0', to: 'shop/cart-0' }),
        flow({}), // prometheus -> cart, now
      ].join('\n'),
    );
    const r = await shop('--flows', f, '--since', '1h', '-o', 'json');
    expect(r.code).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j.policies[0].spec.ingress).toEqual([
      {
        from: [
          {
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } },
            podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } },
          },
        ],
        ports: [{ protocol: 'TCP', port: 'http' }],
      },
    ]);
    const none = await run('netpol', 'recommend', '-n', 'payments', CLUSTER, '--flows', f, '--since', '1h');
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/no allowed flow of payments was seen: nothing to recommend/);
  });

  it('usage errors name the flag', async () => {
    expect((await run('netpol', 'recommend', CLUSTER, '--flows', FLOWS)).stderr).toMatch(
      /-n NS: the namespace/,
    );
    expect((await run('netpol', 'recommend', '-n', 'Shop!', CLUSTER, '--flows', FLOWS)).stderr).toMatch(
      /-n NS/,
    );
    expect((await shop('--flows', FLOWS, '--since', 'an hour')).stderr).toMatch(
      /--since an hour: a duration such as 30m, 1h or 2d/,
    );
    expect((await run('netpol', 'recommend', '-n', 'shop', CLUSTER)).stderr).toMatch(/give --flows FILE/);
    const missing = await shop('--flows', join(dir, 'nope.ndjson'));
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/nope\.ndjson: cannot read: ENOENT/);
  });
});
