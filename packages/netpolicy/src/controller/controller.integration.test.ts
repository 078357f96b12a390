// netpolicy-controller against kube-apiserver: EffectivePolicies of kind Network per (namespace, pod
// label set), read by a tenant with only namespace `view`; status conditions on the admin policies;
// a Warning Event on a NetworkPolicy with a dead rule; pod churn inside a label set writes nothing;
// a new label set and the last pod of one; a restart writes nothing; leader failover.
import { effectivePolicyCrd, viewClusterRole } from '@cascade/core';
import type { KubeClient } from '@cascade/core/kube';
import { createNamespace } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, waitFor } from '@cascade/envtest';
import { isEqual } from 'lodash-es';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { controllerClient, startNetpolController } from '../../test/fixtures.ts';
import { podAddressSliceCrd, SLICES_PUBLISHED, type SliceSpec } from '../cluster/slices.ts';
import type { NetpolController } from './controller.ts';

const ANP = '/apis/policy.networking.k8s.io/v1alpha1/adminnetworkpolicies';
const EP = (ns: string) => `/apis/cascade.dev/v1alpha1/namespaces/${ns}/effectivepolicies`;

interface Ep {
  metadata: { name: string; namespace: string };
  spec: {
    policyKind: string;
    targetRef: { name: string };
    network: {
      podSelector: { matchLabels: Record<string, string> };
      ingress: {
        tier: string;
        policy: string;
        rule: string;
        action: string;
        peers: { peer: string; selectsNone?: boolean }[];
      }[];
      egress: unknown[];
    };
  };
}

describe.skipIf(!apiServerTestsEnabled())('netpolicy-controller against kube-apiserver', () => {
  let env: Envtest;
  let client: KubeClient;
  const controllers: NetpolController[] = [];
  const start = async (identity: string) => {
    const c = await startNetpolController(client, {
      identity,
      leaseNamespace: 'cascade-system',
      // pod changes batched for slices (what a large cluster would set): a churn is one write
      sliceBatchMillis: 1000,
      // two label sets per namespace are selected one by one by other namespaces' NetworkPolicies:
      // the setup stays under it, the last test goes over (engine/identity-cap.ts)
      foreignIdentityCap: 2,
    });
    controllers.push(c);
    return c;
  };
  const SLICES = '/apis/cascade.dev/v1alpha1/podaddressslices';
  const slices = async () =>
    (
      (await env.call('GET', SLICES)).body as { items: { metadata: { name: string }; spec: SliceSpec }[] }
    ).items
      .filter((x) => x.metadata.name !== SLICES_PUBLISHED)
      .map((x) => x.spec);
  const list = async (ns: string) => ((await env.call('GET', EP(ns))).body as { items: Ep[] }).items;
  let ip = 10;
  const pod = (ns: string, name: string, labels: Record<string, string>) =>
    env.runningPod(ns, name, {
      node: 'n1',
      ip: `10.70.0.${ip++}`,
      labels,
      ports: [{ name: 'http', containerPort: 80 }],
    });
  const anp = (name: string, priority: number, subjectNs: Record<string, string>, rules: unknown[]) =>
    env.call('POST', ANP, {
      apiVersion: 'policy.networking.k8s.io/v1alpha1',
      kind: 'AdminNetworkPolicy',
      metadata: { name },
      spec: { priority, subject: { namespaces: { matchLabels: subjectNs } }, ingress: rules },
    });
  const settle = async (c: NetpolController) => {
    await new Promise((r) => setTimeout(r, 300));
    await c.idle();
  };

  beforeAll(async () => {
    env = await Envtest.start({ crdObjects: [effectivePolicyCrd, podAddressSliceCrd] });
    for (const [name, labels] of [
      ['shop', { team: 'shop' }],
      ['sandbox', { env: 'dev' }],
    ] as const)
      await createNamespace(env, name, labels);
    await env.call('POST', '/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1' } });
    await pod('shop', 'web-1', { app: 'web' });
    await pod('shop', 'web-2', { app: 'web' });
    await pod('shop', 'cart', { app: 'cart' });
    await pod('sandbox', 'toy', { app: 'toy' });
    const deny = [
      { name: 'deny-dev', action: 'Deny', from: [{ namespaces: { matchLabels: { env: 'dev' } } }] },
    ];
    expect((await anp('dev-never-reaches-shop', 20, { team: 'shop' }, deny)).status).toBe(201);
    expect((await anp('same-priority', 20, { team: 'shop' }, deny)).status).toBe(201);
    expect((await anp('selects-nothing', 30, { team: 'nobody' }, deny)).status).toBe(201);
    await env.call('POST', '/apis/networking.k8s.io/v1/namespaces/shop/networkpolicies', {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'cart-from-web', namespace: 'shop' },
      spec: {
        podSelector: { matchLabels: { app: 'cart' } },
        ingress: [{ from: [{ podSelector: { matchLabels: { app: 'web' } } }], ports: [{ port: 'http' }] }],
      },
    });
    // every connection this rule allows from the sandbox is denied first by the ANP: dead
    await env.call('POST', '/apis/networking.k8s.io/v1/namespaces/shop/networkpolicies', {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'cart-from-sandbox', namespace: 'shop' },
      spec: {
        podSelector: { matchLabels: { app: 'cart' } },
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { env: 'dev' } } }] }],
      },
    });
    // as its ServiceAccount with exactly the chart's RBAC
    client = await controllerClient(env);
  }, 120_000);

  afterAll(async () => {
    for (const c of controllers) await c.stop().catch(() => {});
    await env?.stop();
  });

  it('publishes one EffectivePolicy per namespace and pod label set, admin rules first', async () => {
    const c = await start('a');
    await waitFor('leader', async () => (c.leader ? true : undefined));
    await waitFor('published', async () => ((await list('shop')).length === 2 ? true : undefined));
    await settle(c);
    const shop = await list('shop');
    expect(shop.map((e) => e.spec.targetRef.name).sort()).toEqual(['app=cart', 'app=web']);
    expect((await list('sandbox')).map((e) => e.spec.targetRef.name)).toEqual(['app=toy']);
    const cart = shop.find((e) => e.spec.targetRef.name === 'app=cart')!;
    expect(cart.metadata.name).toMatch(/^network-[0-9a-f]{20}$/);
    expect(cart.spec.policyKind).toBe('Network');
    expect(cart.spec.network.podSelector).toEqual({ matchLabels: { app: 'cart' } });
    expect(cart.spec.network.ingress.map((r) => `${r.tier} ${r.policy} ${r.rule} ${r.action}`)).toEqual([
      'admin AdminNetworkPolicy/dev-never-reaches-shop deny-dev Deny',
      'admin AdminNetworkPolicy/same-priority deny-dev Deny',
      'networkpolicy NetworkPolicy/shop/cart-from-sandbox ingress[0] Allow',
      'networkpolicy NetworkPolicy/shop/cart-from-web ingress[0] Allow',
      'networkpolicy NetworkPolicy/shop/cart-from-sandbox ingress isolation Deny',
      'networkpolicy NetworkPolicy/shop/cart-from-web ingress isolation Deny',
    ]);
    // web-1 and web-2 are one label set: one object; the peer selects pods (no selectsNone)
    expect(cart.spec.network.ingress[3]!.peers).toEqual([{ peer: 'namespaces shop pods {app=web}' }]);
  });

  it('publishes PodAddressSlices: every pod with an address, by namespace and label set, named ports once', async () => {
    const all = await waitFor('slices', async () => ((await slices()).length === 3 ? slices() : undefined));
    const byLabels = Object.fromEntries(all.map((x) => [`${x.namespace} ${JSON.stringify(x.labels)}`, x]));
    expect(Object.keys(byLabels).sort()).toEqual([
      'sandbox {"app":"toy"}',
      'shop {"app":"cart"}',
      'shop {"app":"web"}',
    ]);
    const web = byLabels['shop {"app":"web"}']!;
    expect(web.ports).toEqual([{ name: 'http', port: 80, protocol: 'TCP' }]);
    expect(web.pods.map((p) => p.name).sort()).toEqual(['web-1', 'web-2']);
    expect(web.pods[0]).toMatchObject({ node: 'n1', ips: [expect.stringMatching(/^10\.70\.0\./)] });
    // the marker agents wait for: a complete set has been published
    const marker = await env.call('GET', `${SLICES}/${SLICES_PUBLISHED}`);
    expect((marker.body as { spec: SliceSpec }).spec).toEqual({
      namespace: 'cascade-system',
      labels: {},
      pods: [],
    });
    // a slice deleted by someone else comes back
    const toy = (
      (await env.call('GET', SLICES)).body as { items: { metadata: { name: string }; spec: SliceSpec }[] }
    ).items.find((x) => x.spec.namespace === 'sandbox')!;
    expect((await env.call('DELETE', `${SLICES}/${toy.metadata.name}`)).status).toBe(200);
    await waitFor('the deleted slice is published again', async () =>
      (await env.call('GET', `${SLICES}/${toy.metadata.name}`)).status === 200 ? true : undefined,
    );
    // cluster-scoped and the controller's: a namespace tenant cannot read (or write) them
    const r = await env.call('GET', SLICES, undefined, 'application/json', { 'Impersonate-User': 'tenant' });
    expect(r.status).toBe(403);
  });

  it('a tenant with only `view` on its namespace reads the admin rules that affect its pods', async () => {
    for (const o of [
      viewClusterRole([]),
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name: 'tenant-view', namespace: 'shop' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cascade-view' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'tenant' }],
      },
    ]) {
      const path =
        o.kind === 'ClusterRole'
          ? '/apis/rbac.authorization.k8s.io/v1/clusterroles'
          : '/apis/rbac.authorization.k8s.io/v1/namespaces/shop/rolebindings';
      expect((await env.call('POST', path, o)).status).toBe(201);
    }
    const as = (path: string) =>
      env.call('GET', path, undefined, 'application/json', { 'Impersonate-User': 'tenant' });
    const mine = await waitFor('the binding reaches the authorizer', async () => {
      const r = await as(EP('shop'));
      return r.status === 200 ? r : undefined;
    });
    const rules = (mine.body as { items: Ep[] }).items.flatMap((e) =>
      e.spec.network.ingress.map((r) => r.policy),
    );
    expect(rules).toContain('AdminNetworkPolicy/dev-never-reaches-shop');
    expect((await as(ANP)).status).toBe(403); // cluster-scoped admin policies stay unreadable
    expect((await as(EP('sandbox'))).status).toBe(403);
  });

  it('status conditions on the admin policies; a Warning Event on a NetworkPolicy with a dead rule', async () => {
    const cond = async (name: string, type: string) => {
      const o = (await env.call('GET', `${ANP}/${name}`)).body as {
        status?: { conditions?: { type: string; status: string; reason: string; message: string }[] };
      };
      return o.status?.conditions?.find((c) => c.type === type);
    };
    await waitFor('conditions', async () =>
      (await cond('selects-nothing', 'Selecting')) ? true : undefined,
    );
    expect(await cond('dev-never-reaches-shop', 'Accepted')).toMatchObject({
      status: 'True',
      reason: 'Accepted',
    });
    expect(await cond('dev-never-reaches-shop', 'Selecting')).toMatchObject({
      status: 'True',
      message: 'selects pods of 2 label sets in 1 namespace',
    });
    expect(await cond('selects-nothing', 'Selecting')).toMatchObject({ status: 'False', reason: 'NoPods' });
    expect(await cond('same-priority', 'Overlapping')).toMatchObject({
      status: 'True',
      reason: 'SamePriority',
    });
    expect((await cond('same-priority', 'Overlapping'))!.message).toMatch(/dev-never-reaches-shop/);
    const event = await waitFor('an Event on the dead rule', async () => {
      const r = (await env.call('GET', '/api/v1/namespaces/shop/events')).body as {
        items: { involvedObject: { name: string }; reason: string; message: string; type: string }[];
      };
      return r.items.find((e) => e.involvedObject.name === 'cart-from-sandbox');
    });
    expect(event).toMatchObject({ type: 'Warning', reason: 'DeadRules' });
    expect(event.message).toMatch(
      /ingress\[0\] is dead: .*AdminNetworkPolicy\/dev-never-reaches-shop#deny-dev/,
    );
  });

  it('pod churn inside a label set writes nothing; a new label set and the last pod of one do', async () => {
    const c = controllers[0]!;
    await settle(c);
    const before = c.writes.get();
    const slicesBefore = c.sliceWrites.get();
    await pod('shop', 'web-3', { app: 'web' });
    await env.call('DELETE', '/api/v1/namespaces/shop/pods/web-1?gracePeriodSeconds=0');
    await settle(c);
    await settle(c);
    expect(c.writes.get() - before).toBe(0);
    // and computes nothing: the pod identities did not move
    expect(c.lastUpdate).toMatchObject({ effectives: false, conditions: false });
    // the PodAddressSlice of app=web changed: web-3 in, web-1 out, in one write (one batch period)
    expect(c.sliceWrites.get() - slicesBefore).toBe(1);
    const web = (await slices()).find((x) => x.labels.app === 'web')!;
    expect(web.pods.map((p) => p.name).sort()).toEqual(['web-2', 'web-3']);
    const statusOnly = c.sliceWrites.get();
    await env.call(
      'PATCH',
      '/api/v1/namespaces/shop/pods/web-3/status',
      { status: { conditions: [{ type: 'Ready', status: 'True' }] } },
      'application/strategic-merge-patch+json',
    );
    await settle(c);
    expect(c.sliceWrites.get() - statusOnly).toBe(0); // a status-only update: no slice write
    await pod('shop', 'admin', { app: 'admin' });
    await waitFor('a new label set', async () => ((await list('shop')).length === 3 ? true : undefined));
    await settle(c);
    const afterNew = c.writes.get() - before;
    // its EffectivePolicy, and the admin policies' "selects N label sets" conditions (2 -> 3)
    expect(afterNew).toBeGreaterThanOrEqual(1);
    expect(afterNew).toBeLessThanOrEqual(4);
    await env.call('DELETE', '/api/v1/namespaces/shop/pods/admin?gracePeriodSeconds=0');
    await waitFor('gone with its last pod', async () =>
      (await list('shop')).length === 2 ? true : undefined,
    );
  });

  it('an EffectivePolicy deleted or edited by someone else is put back (only it is compared)', async () => {
    const c = controllers[0]!;
    await settle(c);
    const [a, b] = await list('shop');
    expect((await env.call('DELETE', `${EP('shop')}/${a!.metadata.name}`)).status).toBe(200);
    await env.call(
      'PATCH',
      `${EP('shop')}/${b!.metadata.name}`,
      { spec: { network: { ingress: [] } } },
      'application/merge-patch+json',
    );
    await waitFor('both put back', async () => {
      const now = await list('shop');
      const x = now.find((e) => e.metadata.name === a!.metadata.name);
      const y = now.find((e) => e.metadata.name === b!.metadata.name);
      return x && y && isEqual(x.spec, a!.spec) && isEqual(y.spec, b!.spec) ? true : undefined;
    });
    await settle(c);
    // put back from what was computed before: nothing recomputed for it
    expect(c.lastUpdate?.effectives).toBe(false);
  });

  it("one EffectivePolicy refused (a namespace's ResourceQuota) holds back nothing else, and is published once the quota allows", async () => {
    const c = controllers[0]!;
    await createNamespace(env, 'quota', { team: 'quota' });
    const RQ = '/api/v1/namespaces/quota/resourcequotas';
    const hard = (n: string) => ({ 'count/effectivepolicies.cascade.dev': n });
    await env.call('POST', RQ, {
      apiVersion: 'v1',
      kind: 'ResourceQuota',
      metadata: { name: 'eps', namespace: 'quota' },
      spec: { hard: hard('1') },
    });
    // no kube-controller-manager here: the quota's usage is set as its controller would
    const setStatus = async (n: string) => {
      const q = (await env.call('GET', `${RQ}/eps`)).body as { metadata: object; spec: object };
      const used = (await list('quota')).length;
      expect(
        (
          await env.call('PUT', `${RQ}/eps/status`, {
            ...q,
            spec: { hard: hard(n) },
            status: { hard: hard(n), used: { 'count/effectivepolicies.cascade.dev': String(used) } },
          })
        ).status,
      ).toBe(200);
    };
    await setStatus('1');
    await pod('quota', 'a', { app: 'a' });
    await pod('quota', 'b', { app: 'b' });
    await waitFor('one refused by the quota', async () => (c.ledger.failures.size === 1 ? true : undefined));
    const [failure] = [...c.ledger.failures.values()];
    expect(failure).toMatchObject({ status: 403, permanent: false });
    expect(failure!.message).toMatch(/exceeded quota/);
    expect(await list('quota')).toHaveLength(1);
    // the others go on: a new label set elsewhere is published meanwhile
    await pod('shop', 'quota-time', { app: 'meanwhile' });
    await waitFor('shop published meanwhile', async () =>
      (await list('shop')).some((e) => e.spec.network.podSelector.matchLabels.app === 'meanwhile')
        ? true
        : undefined,
    );
    // the quota raised: the refused object is tried again on its own (backoff), no event needed
    await setStatus('5');
    await waitFor(
      'both published',
      async () => ((await list('quota')).length === 2 ? true : undefined),
      90_000,
    );
    await waitFor('nothing failing', async () => (c.ledger.failures.size === 0 ? true : undefined));
    await env.call('DELETE', '/api/v1/namespaces/shop/pods/quota-time?gracePeriodSeconds=0');
    await env.call('DELETE', '/api/v1/namespaces/quota/pods/a?gracePeriodSeconds=0');
    await env.call('DELETE', '/api/v1/namespaces/quota/pods/b?gracePeriodSeconds=0');
  }, 120_000);

  it('a restart writes nothing; the lease moves to a standby when the leader stops', async () => {
    const first = controllers[0]!;
    await settle(first);
    const standby = await start('b');
    await settle(standby);
    expect(standby.leader).toBe(false);
    expect(standby.writes.get()).toBe(0);
    await first.stop();
    await waitFor('standby leads', async () => (standby.leader ? true : undefined), 20_000);
    await settle(standby);
    expect(standby.writes.get()).toBe(0);
    expect(standby.sliceWrites.get()).toBe(0);
    expect(standby.skipped.get()).toBeGreaterThan(0);
    // and it acts: a new NetworkPolicy shows in the EffectivePolicy of the pods it selects
    await env.call('POST', '/apis/networking.k8s.io/v1/namespaces/shop/networkpolicies', {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'web-from-anywhere', namespace: 'shop' },
      spec: { podSelector: { matchLabels: { app: 'web' } }, ingress: [{}] },
    });
    await waitFor('the new policy is published', async () => {
      const web = (await list('shop')).find((e) => e.spec.targetRef.name === 'app=web');
      return web?.spec.network.ingress.some((r) => r.policy === 'NetworkPolicy/shop/web-from-anywhere')
        ? true
        : undefined;
    });
  }, 60_000);

  it('a namespace past the identity cap gets a Warning Event, a log line and a metric sample', async () => {
    for (const n of ['2', '3', '4']) await pod('sandbox', `toy-${n}`, { app: 'toy', n });
    const event = await waitFor('an IdentityCapReached Event on Namespace sandbox', async () => {
      const r = (await env.call('GET', '/api/v1/namespaces/default/events')).body as {
        items: { involvedObject: { kind: string; name: string }; reason: string; message: string }[];
      };
      return r.items.find((e) => e.reason === 'IdentityCapReached' && e.involvedObject.name === 'sandbox');
    });
    expect(event.involvedObject.kind).toBe('Namespace');
    // posted when the namespace went over (3 or 4 label sets by then), again only if that doubles
    expect(event.message).toMatch(
      /^[34] distinct pod label sets, over the identity cap of 2: the [12] newest are left out of other namespaces' NetworkPolicy peers/,
    );
    await waitFor('the metric counts both capped label sets', async () => {
      const leader = controllers.find((c) => c.leader);
      const text = leader ? await leader.metrics.render() : '';
      return /cascade_netpol_capped_label_sets\{namespace="sandbox"\} 2/.test(text) ? true : undefined;
    });
  }, 60_000);
});
