// netpolicy's integration-test set-up, in one place (as core's testing module is for the gateway
// controllers): an agent for node n1 against the test API server and a datapath, and a
// netpolicy-controller, each with test settings (silent log, a 2 s lease), started.
import { controllerBinding } from '@cascade/core';
import type { KubeClient } from '@cascade/core/kube';
import { clientOf } from '@cascade/core/testing';
import { type Envtest, waitFor } from '@cascade/envtest';
import { NetpolAgent } from '../src/agent/agent.ts';
import type { AgentOptions } from '../src/agent/options.ts';
import { NetpolController, type NetpolControllerOptions } from '../src/controller/controller.ts';
import { CONTROLLER_NAME, controllerLeaseRole, netpolControllerClusterRole } from '../src/controller/rbac.ts';

/**
 * A client acting as the netpolicy-controller's ServiceAccount in cascade-system with exactly the
 * chart's RBAC: a missing grant fails the tests, not only a review of the role.
 */
export async function controllerClient(env: Envtest): Promise<KubeClient> {
  const SYS = 'cascade-system';
  return clientOf(
    env,
    await env.serviceAccount(
      SYS,
      CONTROLLER_NAME,
      [netpolControllerClusterRole(), controllerBinding(CONTROLLER_NAME, SYS), ...controllerLeaseRole(SYS)],
      '/api/v1/pods?limit=1',
    ),
  );
}

/** An agent for node n1; `ready`: wait until its caches synced and it wrote the datapath. */
export async function startAgent(
  env: { readonly kubeconfig: string },
  datapath: AgentOptions['datapath'],
  overrides: Partial<AgentOptions> = {},
  ready = true,
): Promise<NetpolAgent> {
  const agent = new NetpolAgent({ client: clientOf(env), node: 'n1', datapath, log: () => {}, ...overrides });
  await agent.start();
  if (ready) await waitFor('agent ready', async () => (agent.ready ? true : undefined));
  return agent;
}

/**
 * A pod on node n1 with its addresses in its status (as a kubelet and CNI would make it Running), for
 * the agent tests; returns the Pod as the API server has it.
 */
export async function runningPod(
  env: Envtest,
  ns: string,
  name: string,
  ip: string,
  ports: { name: string; containerPort: number }[] = [],
): Promise<Record<string, unknown>> {
  const r = await env.call('POST', `/api/v1/namespaces/${ns}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: ns, labels: { app: name } },
    spec: { nodeName: 'n1', containers: [{ name: 'c', image: 'example/c', ports }] },
  });
  if (r.status !== 201)
    throw new Error(`pod ${ns}/${name}: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
  const s = await env.call('PUT', `/api/v1/namespaces/${ns}/pods/${name}/status`, {
    ...(r.body as object),
    status: { phase: 'Running', podIP: ip, podIPs: [{ ip }] },
  });
  if (s.status !== 200) throw new Error(`pod ${ns}/${name} status: ${s.status}`);
  return s.body as Record<string, unknown>;
}

/** A netpolicy-controller with test settings (silent log, a 2 s lease), started. */
export async function startNetpolController(
  client: NetpolControllerOptions['client'],
  overrides: Partial<NetpolControllerOptions> = {},
): Promise<NetpolController> {
  const c = new NetpolController({ client, leaseDurationSeconds: 2, log: () => {}, ...overrides });
  await c.start();
  return c;
}
