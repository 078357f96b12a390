// The uninstall signal on a real API server: the agent's DaemonSet present is a restart (the node is
// kept), deleted while watched or gone at SIGTERM is an uninstall; the grant is the chart's own Role
// (its DaemonSet by name only), checked by impersonating the agent's ServiceAccount.
import { clientOf, createNamespace } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, waitFor } from '@cascade/envtest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentOwnDaemonSetRole } from './rbac.ts';
import { UninstallSignal } from './uninstall.ts';

const NS = 'cascade-system';
const DS = `/apis/apps/v1/namespaces/${NS}/daemonsets`;
const daemonSet = (name: string) => ({
  apiVersion: 'apps/v1',
  kind: 'DaemonSet',
  metadata: { name, namespace: NS },
  spec: {
    selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'a', image: 'x' }] } },
  },
});

describe.skipIf(!apiServerTestsEnabled())('the agent tells an uninstall from a restart', () => {
  let env: Envtest;
  beforeAll(async () => {
    env = await Envtest.start();
    await createNamespace(env, NS);
  }, 120_000);
  afterAll(async () => {
    await env?.stop();
  });

  it('its DaemonSet there: not an uninstall; deleted while watched: an uninstall', async () => {
    expect((await env.call('POST', DS, daemonSet('netpolicy-agent'))).status).toBe(201);
    const kept = new UninstallSignal(clientOf(env), NS, 'netpolicy-agent');
    kept.start();
    await new Promise((r) => setTimeout(r, 500));
    expect(await kept.uninstalling()).toBe(false);
    const watched = new UninstallSignal(clientOf(env), NS, 'netpolicy-agent');
    watched.start();
    await new Promise((r) => setTimeout(r, 500));
    expect((await env.call('DELETE', `${DS}/netpolicy-agent`)).status).toBe(200);
    // the watch saw it: the answer needs no request (the agent's grant may be gone by SIGTERM)
    await waitFor('the deletion seen', async () =>
      (watched as unknown as { deleted: boolean }).deleted ? true : undefined,
    );
    expect(await watched.uninstalling()).toBe(true);
  });

  it('gone at SIGTERM without a watch event (a 404): an uninstall', async () => {
    const late = new UninstallSignal(clientOf(env), NS, 'never-created');
    expect(await late.uninstalling()).toBe(true);
    const other = new UninstallSignal(clientOf(env), 'no-such-namespace-x', 'netpolicy-agent');
    expect(await other.uninstalling()).toBe(true); // a 404 all the same
  });

  it("the chart's Role grants reading its own DaemonSet only, by name", async () => {
    for (const o of agentOwnDaemonSetRole(NS)) {
      const kind = (o as { kind: string }).kind;
      const path = `/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/${kind === 'Role' ? 'roles' : 'rolebindings'}`;
      expect((await env.call('POST', path, o)).status).toBe(201);
    }
    const can = async (verb: string, name?: string) => {
      const r = await env.call('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          user: `system:serviceaccount:${NS}:netpolicy-agent`,
          resourceAttributes: {
            namespace: NS,
            verb,
            group: 'apps',
            resource: 'daemonsets',
            ...(name ? { name } : {}),
          },
        },
      });
      return (r.body as { status: { allowed: boolean } }).status.allowed;
    };
    // the API server's RBAC authorizer reads Roles through its own informers: a Role just created
    // may not be seen by the first review (this failed once in CI on a loaded machine)
    await waitFor('the Role in force', async () =>
      (await can('watch', 'netpolicy-agent')) ? true : undefined,
    );
    expect(await can('get', 'netpolicy-agent')).toBe(true);
    expect(await can('get', 'other')).toBe(false);
    expect(await can('list')).toBe(false);
    expect(await can('delete', 'netpolicy-agent')).toBe(false);
  });
});
