// An agent that does not watch every Pod (--pod-source=slices) end to end: a real kube-apiserver, the
// netpolicy-controller publishing PodAddressSlices, the agent of node n1 watching its own node's Pods
// and the slices, each component as its ServiceAccount with exactly the chart's RBAC, and the real BPF
// program judging packets from a pod on another node, which the agent knows only from a slice (after
// watching every Pod while no slices were published).
import { FixedInterface, TEST_RUN_IFINDEX } from '@cascade/bpf-datapath';
import { freshDatapath, kernelTestsEnabled, kernelVerdict } from '@cascade/bpf-datapath/testing';
import { controllerBinding, effectivePolicyCrd } from '@cascade/core';
import { clientOf, createNamespace } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, waitFor } from '@cascade/envtest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NetpolAgent } from '../src/agent/agent.ts';
import { AGENT_NAME, agentClusterRole } from '../src/agent/rbac.ts';
import { podAddressSliceCrd } from '../src/cluster/slices.ts';
import type { NetpolController } from '../src/controller/controller.ts';
import { CONTROLLER_NAME, controllerLeaseRole, netpolControllerClusterRole } from '../src/controller/rbac.ts';
import { startAgent, startNetpolController } from './fixtures.ts';

const CLIENT = '10.62.0.1';
const MOVED = '10.62.0.3';
const SERVER = '10.62.0.2';
const SYS = 'cascade-system';

describe.skipIf(!(apiServerTestsEnabled() && kernelTestsEnabled()))(
  'an agent fed by PodAddressSlices against kube-apiserver and the kernel',
  () => {
    let env: Envtest;
    let dp: Awaited<ReturnType<typeof freshDatapath>>;
    let agent: NetpolAgent;
    let controller: NetpolController;
    let controllerKc: string;
    const verdict = (src: string, dport: number) =>
      kernelVerdict(dp.dp, 'ingress', { src, dst: SERVER, proto: 6, sport: 40000 + dport, dport });
    const becomes = (what: string, src: string, dport: number, want: 'allow' | 'deny') =>
      waitFor(`${what}: ${src} TCP/${dport} ${want}`, async () => {
        await dp.dp.clearConntrack();
        return (await verdict(src, dport)) === want ? true : undefined;
      });
    const pod = (ns: string, name: string, node: string, ip: string, ports: unknown[] = []) =>
      env.runningPod(ns, name, { node, ip, ports });
    const kubeconfig = (path: string) => clientOf(env, path);

    beforeAll(async () => {
      env = await Envtest.start({ crdObjects: [effectivePolicyCrd, podAddressSliceCrd] });
      for (const [name, labels] of [
        ['app', { team: 'app' }],
        ['db', { team: 'db' }],
      ] as const)
        await createNamespace(env, name, labels);
      for (const name of ['n1', 'n2'])
        await env.call('POST', '/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name } });
      await pod('db', 'server', 'n1', SERVER, [{ name: 'http', containerPort: 80 }]);
      await pod('app', 'client', 'n2', CLIENT);
      await env.call('POST', '/apis/networking.k8s.io/v1/namespaces/db/networkpolicies', {
        apiVersion: 'networking.k8s.io/v1',
        kind: 'NetworkPolicy',
        metadata: { name: 'server-from-app', namespace: 'db' },
        spec: {
          podSelector: { matchLabels: { app: 'server' } },
          ingress: [
            { from: [{ namespaceSelector: { matchLabels: { team: 'app' } } }], ports: [{ port: 'http' }] },
          ],
        },
      });
      controllerKc = await env.serviceAccount(
        SYS,
        CONTROLLER_NAME,
        [netpolControllerClusterRole(), controllerBinding(CONTROLLER_NAME, SYS), ...controllerLeaseRole(SYS)],
        '/api/v1/pods?limit=1',
      );
      const agentKc = await env.serviceAccount(
        SYS,
        AGENT_NAME,
        [agentClusterRole(), controllerBinding(AGENT_NAME, SYS)],
        '/apis/cascade.dev/v1alpha1/podaddressslices?limit=1',
      );
      dp = await freshDatapath();
      agent = await startAgent(
        env,
        dp.dp,
        {
          client: kubeconfig(agentKc),
          interfaces: new FixedInterface(TEST_RUN_IFINDEX),
          manageAttachments: false,
          podSource: 'slices',
        },
        false,
      );
    }, 120_000);

    afterAll(async () => {
      await agent?.stop();
      await controller?.stop();
      await dp?.cleanup();
      await env?.stop();
    });

    it('watches every Pod until the controller has published its slices, then only its own and the slices', async () => {
      // no controller yet (a new install): the agent enforces from every Pod, so no pod waits on it
      await waitFor('agent ready', async () => (agent.ready ? true : undefined));
      expect(agent.bootstrapping).toBe(true);
      await becomes('client from the Pod API', CLIENT, 80, 'allow');
      expect(agent.slices.size).toBe(0);
      controller = await startNetpolController(kubeconfig(controllerKc), {
        identity: 'c1',
        leaseNamespace: SYS,
      });
      await waitFor('the marker', async () => (agent.slices.published ? true : undefined));
      expect(agent.bootstrapping).toBe(false);
      expect(agent.slices.size).toBe(1);
      expect(await verdict(CLIENT, 80)).toBe('allow'); // the same verdict across the switch
    });

    it('judges a pod of another node it knows only from a slice (named port resolved on its own pod)', async () => {
      await becomes('client from its slice', CLIENT, 80, 'allow');
      expect(await verdict(CLIENT, 81)).toBe('deny');
      expect(agent.slices.size).toBe(1); // the client; its own server comes from the Pod API
      expect(agent.slices.get('app/client')).toMatchObject({ node: 'n2', ips: [CLIENT] });
      expect(agent.engine.pods.has('db/server')).toBe(true);
    });

    it('follows the other node: the client recreated at a new address; the old one is nobody now', async () => {
      expect(
        (await env.call('DELETE', '/api/v1/namespaces/app/pods/client?gracePeriodSeconds=0')).status,
      ).toBe(200);
      await pod('app', 'client', 'n2', MOVED);
      await becomes('client at its new address', MOVED, 80, 'allow');
      await becomes('its old address', CLIENT, 80, 'deny');
      expect(agent.slices.get('app/client')?.ips).toEqual([MOVED]);
    });

    it('keeps what it knows while the controller is away, and catches up when one leads again', async () => {
      await controller.stop();
      await pod('app', 'late', 'n2', CLIENT);
      await new Promise((r) => setTimeout(r, 500));
      // nobody published the new pod: its address is not a pod the agent knows, and the client stays
      await dp.dp.clearConntrack();
      expect(await verdict(CLIENT, 80)).toBe('deny');
      expect(await verdict(MOVED, 80)).toBe('allow');
      controller = await startNetpolController(kubeconfig(controllerKc), {
        identity: 'c2',
        leaseNamespace: SYS,
      });
      await becomes('the late pod, published by the new leader', CLIENT, 80, 'allow');
    }, 60_000);
  },
);
