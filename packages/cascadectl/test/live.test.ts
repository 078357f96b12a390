// cascadectl against a live cluster (--kubeconfig / --context): the example story applied to a real
// kube-apiserver is read back, and the answers are the ones the files give.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { authPolicyKind } from '@cascade/authpolicy';
import { effectivePolicyCrd, policyCrd } from '@cascade/core';
import { clientOf, createObjects, readObjects, startController } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, waitFor } from '@cascade/envtest';
import { rateLimitPolicyKind } from '@cascade/ratelimitpolicy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { run } from './run.ts';

const GW = resolve(import.meta.dirname, '../../../examples/gateway');

describe.skipIf(!apiServerTestsEnabled())('cascadectl --kubeconfig (a live cluster)', () => {
  let env: Envtest;
  beforeAll(async () => {
    env = await Envtest.start({
      crdObjects: [effectivePolicyCrd, policyCrd(authPolicyKind), policyCrd(rateLimitPolicyKind)],
    });
    // in file order: their creation order is the files' order
    await createObjects(env, readObjects(GW));
  }, 120_000);
  afterAll(async () => env?.stop());

  it('effective, explain and status read the objects from the cluster', async () => {
    const eff = await run('effective', '--kubeconfig', env.kubeconfig, '--kind', 'RateLimitPolicy');
    expect(eff.code, eff.stderr).toBe(0);
    expect(eff.stdout).toContain('HTTPRoute team-b/orders');
    const ex = await run(
      'explain',
      '--kubeconfig',
      env.kubeconfig,
      '--route',
      'team-b/orders',
      '--kind',
      'RateLimitPolicy',
    );
    expect(ex.code, ex.stderr).toBe(0);
    expect(ex.stdout).toContain('infra/platform-cap override merge: applied - constraint clipped 1 rule(s)');
    const st = await run('status', '--kubeconfig', env.kubeconfig, '-o', 'json');
    expect(st.code, st.stderr).toBe(0);
    const report = JSON.parse(st.stdout) as {
      policies: { name: string; conditions: { type: string; reason: string }[] }[];
    };
    expect(report.policies.map((p) => p.name)).toContain('platform-cap');
  });

  it('status --kubeconfig shows the conditions the controllers wrote, and where its own computation differs', async () => {
    const path = '/apis/cascade.dev/v1alpha1/namespaces/infra/ratelimitpolicies/platform-cap/status';
    const cond = (type: string, status: string, reason: string, message: string) => ({
      type,
      status,
      reason,
      message,
      lastTransitionTime: '2026-11-28T00:00:00Z',
    });
    await clientOf(env).apply(
      path,
      {
        apiVersion: 'cascade.dev/v1alpha1',
        kind: 'RateLimitPolicy',
        metadata: { name: 'platform-cap', namespace: 'infra' },
        status: {
          conditions: [
            cond('Accepted', 'True', 'Accepted', 'Policy has been accepted'),
            cond(
              'Enforced',
              'False',
              'MissingDependency',
              'Policy is not enforced: Limitador is not answering',
            ),
          ],
        },
      },
      'ratelimitpolicy-controller',
    );
    const st = await run('status', '--kubeconfig', env.kubeconfig, '-o', 'json');
    expect(st.code, st.stderr).toBe(0);
    const report = JSON.parse(st.stdout) as {
      policies: {
        name: string;
        source?: string;
        conditions: { type: string; reason: string }[];
        differs?: { type: string; cluster: string; computed: string }[];
      }[];
    };
    const cap = report.policies.find((p) => p.name === 'platform-cap')!;
    expect(cap.source).toBe('cluster');
    expect(cap.conditions.find((c) => c.type === 'Enforced')?.reason).toBe('MissingDependency');
    expect(cap.differs).toEqual([
      {
        type: 'Enforced',
        cluster: 'False/MissingDependency',
        computed: expect.stringMatching(/^True\//),
        why: 'Policy is not enforced: Limitador is not answering',
      },
    ]);
    // a policy no controller wrote status on: cascadectl's own, said so
    expect(report.policies.find((p) => p.name === 'orders-per-user')?.source).toBe('computed');
    // a target: the Gateway's <Kind>Affected condition as the controller wrote it (the CRD's own
    // Accepted and Programmed are the gateway controller's, not shown)
    const gw = '/apis/gateway.networking.k8s.io/v1/namespaces/infra/gateways/main';
    const live = (await env.call('GET', gw)).body as { status: { conditions: Record<string, unknown>[] } };
    const put = await env.call('PUT', `${gw}/status`, {
      ...(live as object),
      status: {
        ...live.status,
        conditions: [
          ...live.status.conditions,
          { ...cond('RateLimitPolicyAffected', 'False', 'Unaffected', 'not yet'), observedGeneration: 1 },
        ],
      },
    });
    expect(put.status).toBe(200);
    const withTarget = JSON.parse(
      (await run('status', '--kubeconfig', env.kubeconfig, '-o', 'json')).stdout,
    ) as {
      targets: {
        kind: string;
        name: string;
        source?: string;
        conditions: { type: string; reason: string }[];
      }[];
    };
    const main = withTarget.targets.find((t) => t.kind === 'Gateway' && t.name === 'main')!;
    expect(main.source).toBe('cluster');
    expect(main.conditions.map((c) => `${c.type}=${c.reason}`)).toEqual([
      'RateLimitPolicyAffected=Unaffected',
    ]);
    expect(withTarget.targets.find((t) => t.kind === 'HTTPRoute')?.source).toBe('computed');
    const text = await run('status', '--kubeconfig', env.kubeconfig);
    expect(text.stdout).toMatch(/Gateway infra\/main +- +False\/Unaffected/);
    expect(text.stdout).toContain(
      'Gateway infra/main RateLimitPolicyAffected: the controller wrote False/Unaffected, cascadectl computes True/Affected',
    );
    expect(text.stdout).toMatch(
      /RateLimitPolicy infra\/platform-cap +True\/Accepted +False\/MissingDependency/,
    );
    expect(text.stdout).toContain(
      'RateLimitPolicy infra/platform-cap Enforced: the controller wrote False/MissingDependency, cascadectl computes True/',
    );
  });

  it('diff against the cluster: a file replaces the live object of the same name (what applying it would do)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cascadectl-live-'));
    const changed = join(dir, 'orders-per-user.yaml');
    // team-b's policy as it would be re-applied: its limit renamed, no creationTimestamp (the live one
    // keeps ordering it)
    writeFileSync(
      changed,
      stringify({
        apiVersion: 'cascade.dev/v1alpha1',
        kind: 'RateLimitPolicy',
        metadata: { name: 'orders-per-user', namespace: 'team-b' },
        spec: {
          targetRef: { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'orders' },
          limits: { 'per-session': { rates: [{ limit: 100, window: '1m' }] } },
        },
      }),
    );
    const d = await run('diff', '--kubeconfig', env.kubeconfig, '--after', changed, '-o', 'json');
    expect(d.stderr).not.toMatch(/defined again/);
    expect(d.code, d.stderr).toBe(1);
    const keys = (JSON.parse(d.stdout) as { paths: { rules: { key: string; change: string }[] }[] }).paths
      .flatMap((p) => p.rules)
      .map((r) => `${r.change} ${r.key}`);
    expect(keys).toContain('added limits.per-session');
    expect(keys).toContain('removed limits.per-user');
    // the same object as live: no change, exit 0
    const same = join(dir, 'same.yaml');
    writeFileSync(same, readFileSync(join(GW, '30-team-policies.yaml'), 'utf8'));
    const none = await run('diff', '--kubeconfig', env.kubeconfig, '--after', same);
    expect(none.code, none.stdout + none.stderr).toBe(0);
    // effective -f: the file's version, not the live one and no "defined again"
    const eff = await run(
      'effective',
      '--kubeconfig',
      env.kubeconfig,
      '-f',
      changed,
      '--route',
      'team-b/orders',
      '--kind',
      'rlp',
      '-o',
      'json',
    );
    expect(eff.code, eff.stderr).toBe(0);
    expect(eff.stdout).toContain('per-session');
    expect(eff.stdout).not.toContain('"limits.per-user"');
  });

  it('flows --node: an agent that cannot be exec-ed into, or a user who may not, is one line naming what is needed', async () => {
    await env.call('POST', '/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: 'cascade-system' },
    });
    // envtest has no kubelet: the API server cannot reach node n1 to exec
    await env.runningPod('cascade-system', 'netpolicy-agent-n1', {
      node: 'n1',
      ip: '10.9.9.9',
      labels: { 'app.kubernetes.io/name': 'netpolicy-agent' },
    });
    const noKubelet = await run('flows', '--node', 'n1', '--kubeconfig', env.kubeconfig);
    expect(noKubelet.code).toBe(2);
    expect(noKubelet.stderr).toMatch(
      /--node n1: cannot read the flows of the agent cascade-system\/netpolicy-agent-n1 through pods\/exec: Unexpected server response: 400/,
    );
    expect(noKubelet.stderr).not.toMatch(/internal error|\n\s+at /);
    // a user who may find the agent but not exec into it
    const viewer = await env.serviceAccount(
      'default',
      'pod-reader',
      [
        {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'ClusterRole',
          metadata: { name: 'pod-reader' },
          rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list'] }],
        },
        {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'ClusterRoleBinding',
          metadata: { name: 'pod-reader' },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'pod-reader' },
          subjects: [{ kind: 'ServiceAccount', name: 'pod-reader', namespace: 'default' }],
        },
      ],
      '/api/v1/pods?limit=1',
    );
    const forbidden = await run('flows', '--node', 'n1', '--kubeconfig', viewer);
    expect(forbidden.code).toBe(2);
    expect(forbidden.stderr).toMatch(
      /through pods\/exec: .*403 \(it needs create pods\/exec in cascade-system\)/,
    );
    const none = await run('flows', '--node', 'n2', '--kubeconfig', env.kubeconfig);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(
      /no netpolicy-agent pod \(label app.kubernetes.io\/name=netpolicy-agent\) on node n2/,
    );
    // netpol maps --node reads the node's live maps the same way, with the same answers
    const maps = await run('netpol', 'maps', '--node', 'n1', '--kubeconfig', env.kubeconfig);
    expect(maps.code).toBe(2);
    expect(maps.stderr).toMatch(
      /--node n1: cannot read the maps of the agent cascade-system\/netpolicy-agent-n1 through pods\/exec: Unexpected server response: 400/,
    );
    // netpol trace runs the agent's debug command on the pod's node the same way
    const traced = await run(
      'netpol',
      'trace',
      '--from',
      'cascade-system/netpolicy-agent-n1',
      '--to',
      '10.9.9.8',
      '--port',
      '80',
      '--kubeconfig',
      env.kubeconfig,
    );
    expect(traced.code).toBe(2);
    expect(traced.stderr).toMatch(
      /--node n1: cannot read a trace of the agent cascade-system\/netpolicy-agent-n1 through pods\/exec/,
    );
    const noPod = await run(
      'netpol',
      'trace',
      '--from',
      'shop/nope',
      '--to',
      '10.9.9.8',
      '--port',
      '80',
      '--kubeconfig',
      env.kubeconfig,
    );
    expect(noPod.stderr).toMatch(/--from shop\/nope: no such pod in the cluster's objects/);
    const unknown = await run('netpol', 'maps', '--node', 'nowhere', '--kubeconfig', env.kubeconfig);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/--node nowhere: no such node in the cluster's objects/);
  });

  it('a bad context or kubeconfig is one clear error, exit 2', async () => {
    const r = await run('effective', '--kubeconfig', env.kubeconfig, '--context', 'nope');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--context nope: no such context/);
    const k = await run('effective', '--kubeconfig', '/nonexistent/kubeconfig');
    expect(k.code).toBe(2);
    expect(k.stderr).toMatch(/cannot read the cluster/);
  });

  it('get effective lists what the controller published, per namespace, with its sources', async () => {
    const c = await startController(env, rateLimitPolicyKind);
    try {
      const r = await waitFor('orders published', async () => {
        const g = await run('get', 'effective', '-n', 'team-b', '--kubeconfig', env.kubeconfig);
        return g.stdout.includes('HTTPRoute/orders') ? g : undefined;
      });
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(
        /team-b\s+HTTPRoute\/orders\s+RateLimitPolicy\s+limits\.global,limits\.per-user\s+.*infra\/platform-cap/,
      );
      const one = await run(
        'get',
        'effective',
        'orders',
        '-n',
        'team-b',
        '-o',
        'json',
        '--kubeconfig',
        env.kubeconfig,
      );
      expect((JSON.parse(one.stdout) as unknown[]).length).toBe(1);
      expect((await run('get', 'effective', '-A', '--kubeconfig', env.kubeconfig)).stdout).toMatch(/team-a/);
      const files = await run('get', 'effective');
      expect(files.code).toBe(2);
      expect(files.stderr).toMatch(/give --kubeconfig/);
    } finally {
      await c.stop();
    }
  });
});
