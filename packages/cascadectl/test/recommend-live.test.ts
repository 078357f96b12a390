// `netpol recommend --kubeconfig` on a real kube-apiserver: the objects read from the cluster (pods
// with their addresses, the Service and its EndpointSlice), the flows from a saved file; what it
// writes is accepted as written by the API server, as NetworkPolicies (the real validation: named
// ports, ipBlocks, selectors) and as StagedNetworkPolicies (the chart's CRD), and the staged ones
// change no observed connection in `simulate --staged --kubeconfig`.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { apiServerTestsEnabled, Envtest } from '@cascade/envtest';
import { stagedCrds } from '@cascade/netpolicy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { run } from './run.ts';

const EX = resolve(import.meta.dirname, '../../../examples/recommend');
const FLOWS = resolve(EX, 'flows.ndjson');

interface Obj {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

const pathOf = (o: Obj) => {
  const [group, version] = o.apiVersion.includes('/') ? o.apiVersion.split('/') : ['', o.apiVersion];
  const k = o.kind.toLowerCase();
  const plural = k.endsWith('y') ? `${k.slice(0, -1)}ies` : `${k}s`;
  const base = group ? `/apis/${group}/${version}` : `/api/${version}`;
  return `${base}${o.metadata.namespace ? `/namespaces/${o.metadata.namespace}` : ''}/${plural}`;
};

describe.skipIf(!apiServerTestsEnabled())('netpol recommend on a live API server', () => {
  let env: Envtest;
  beforeAll(async () => {
    env = await Envtest.start({ crdObjects: stagedCrds() });
    const list = parse(readFileSync(resolve(EX, 'cluster.yaml'), 'utf8')) as { items: Obj[] };
    for (const o of list.items) {
      if (o.kind === 'Namespace' && o.metadata.name === 'kube-system') continue;
      if (o.kind === 'Pod') {
        // the example leaves out what the API server requires and the policies never read
        const containers = (o.spec?.containers as Record<string, unknown>[] | undefined) ?? [{ name: 'c' }];
        o.spec = { ...o.spec, containers: containers.map((c) => ({ image: 'example/app', ...c })) };
      }
      const made = await env.call('POST', pathOf(o), o);
      expect(made.status, `${o.kind} ${o.metadata.name}: ${JSON.stringify(made.body)}`).toBe(201);
      if (o.kind === 'Pod' || o.kind === 'Node') {
        const ip = (o.status as { podIP?: string }).podIP;
        const status = ip ? { phase: 'Running', podIP: ip, podIPs: [{ ip }] } : o.status;
        const s = await env.call('PUT', `${pathOf(o)}/${o.metadata.name}/status`, {
          ...(made.body as object),
          status,
        });
        expect(s.status).toBe(200);
      }
    }
  }, 180_000);
  afterAll(async () => env?.stop());
  const recommendLive = (...more: string[]) =>
    run('netpol', 'recommend', '-n', 'shop', '--kubeconfig', env.kubeconfig, '--flows', FLOWS, ...more);

  it('reads the objects from the cluster and proves the flows allowed', async () => {
    const r = await recommendLive();
    expect(r.stderr).toMatch(/proof: 9 of 9 observed connection\(s\) allowed/);
    expect(r.code).toBe(0);
  });

  it('what it writes the API server takes as written: NetworkPolicies and StagedNetworkPolicies', async () => {
    for (const standard of [true, false]) {
      const r = await recommendLive(...(standard ? ['--standard'] : []));
      const docs = parseAllDocuments(r.stdout).map((d) => d.toJS() as Obj);
      expect(docs).toHaveLength(2);
      for (const d of docs) {
        const made = await env.call('POST', pathOf(d), d);
        expect(made.status, JSON.stringify(made.body)).toBe(201);
        // nothing pruned, nothing defaulted away
        expect((made.body as Obj).spec).toEqual(d.spec);
        // the enforced copies go again: the next test judges the staged ones
        if (standard) expect((await env.call('DELETE', `${pathOf(d)}/${d.metadata.name}`)).status).toBe(200);
      }
    }
  });

  it('the staged ones change no observed connection (simulate --staged --kubeconfig)', async () => {
    const r = await run('netpol', 'simulate', '--staged', '--kubeconfig', env.kubeconfig, '-n', 'shop');
    // would-deny changes exist (cart -> web was never seen), none of them an observed connection
    expect(r.stdout).toMatch(/verdict\(s\) the staged policies would change/);
    for (const seen of [
      /shop\/web-7d9f8b6c5-fghij -> shop\/cart-0 +TCP\/9000/,
      /shop\/loadgen -> shop\/web-7d9f8b6c5-abcde +TCP\/8080/,
    ])
      expect(r.stdout).not.toMatch(seen);
  });
});
