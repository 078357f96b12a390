// An agent that reads no Pod cluster-wide (--pod-source=slices) end to end: a real kube-apiserver,
// the netpolicy-controller publishing PodAddressSlices, the agent of node n1 learning every pod, its
// own node's included, from the slices (and Cascade's own namespace's Pods directly, a Role's grant),
// each component as its ServiceAccount with exactly the chart's RBAC (the agent's token bound to its
// pod on n1, as a DaemonSet's is), the chart's ValidatingAdmissionPolicy, and the real BPF program
// judging packets from a pod on another node. The agent's findings go to its node's NetpolNodeReport,
// and the controller posts them as Events (the agent has no Event grant).
import { FixedInterface, TEST_RUN_IFINDEX } from '@cascade/bpf-datapath';
import { freshDatapath, kernelTestsEnabled, kernelVerdict } from '@cascade/bpf-datapath/testing';
import { controllerBinding, effectivePolicyCrd } from '@cascade/core';
import { clientOf, createNamespace } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, waitFor } from '@cascade/envtest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NetpolAgent } from '../src/agent/agent.ts';
import { AGENT_NAME, agentClusterRole, agentOwnPodsRole, agentReportPolicy } from '../src/agent/rbac.ts';
import { NODE_REPORT_PATH, netpolNodeReportCrd } from '../src/cluster/node-report.ts';
import { podAddressSliceCrd } from '../src/cluster/slices.ts';
import type { NetpolController } from '../src/controller/controller.ts';
import { CONTROLLER_NAME, controllerLeaseRole, netpolControllerClusterRole } from '../src/controller/rbac.ts';
import { startAgent, startNetpolController } from './fixtures.ts';

const CLIENT = '10.62.0.1';
const MOVED = '10.62.0.3';
const SERVER = '10.62.0.2';
const CONTROLLER = '10.62.0.9';
const SYS = 'cascade-system';

describe.skipIf(!(apiServerTestsEnabled() && kernelTestsEnabled()))(
  'an agent fed by PodAddressSlices against kube-apiserver and the kernel',
  () => {
    let env: Envtest;
    let dp: Awaited<ReturnType<typeof freshDatapath>>;
    let agent: NetpolAgent;
    let controller: NetpolController;
    let controllerKc: string;
    let agentKc: string;
    let otherAgentKc: string;
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
      env = await Envtest.start({
        crdObjects: [effectivePolicyCrd, podAddressSliceCrd, netpolNodeReportCrd],
      });
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
      // the agents' pods (scheduled, no address: never in a slice), whose tokens carry their node
      await createNamespace(env, SYS, {});
      for (const node of ['n1', 'n2'])
        await env.call('POST', `/api/v1/namespaces/${SYS}/pods`, {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: `agent-${node}`, namespace: SYS },
          spec: {
            nodeName: node,
            serviceAccountName: AGENT_NAME,
            containers: [{ name: 'a', image: 'cascade/agent' }],
          },
        });
      for (const o of agentReportPolicy(SYS)) {
        const r = await env.call(
          'POST',
          `/apis/admissionregistration.k8s.io/v1/${o.kind === 'ValidatingAdmissionPolicy' ? 'validatingadmissionpolicies' : 'validatingadmissionpolicybindings'}`,
          o,
        );
        expect(r.status).toBe(201);
      }
      const rbac = [agentClusterRole(), controllerBinding(AGENT_NAME, SYS), ...agentOwnPodsRole(SYS)];
      // a controller's pod in Cascade's own namespace, with an address on n1
      await pod(SYS, 'controller', 'n1', CONTROLLER);
      const probe = '/apis/cascade.dev/v1alpha1/podaddressslices?limit=1';
      agentKc = await env.serviceAccount(SYS, AGENT_NAME, rbac, probe, 'agent-n1');
      otherAgentKc = await env.serviceAccount(SYS, AGENT_NAME, rbac, probe, 'agent-n2');
      dp = await freshDatapath();
      agent = await startAgent(
        env,
        dp.dp,
        {
          client: kubeconfig(agentKc),
          interfaces: new FixedInterface(TEST_RUN_IFINDEX),
          manageAttachments: false,
          podSource: 'slices',
          ownNamespace: SYS,
          // one Service per namespace: the second Service of a namespace is a finding to report
          serviceBudget: { frontends: 1, backends: 16_384, reserved: [] },
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

    it('reads no Pod: touches nothing until the controller has published its slices, then enforces from them', async () => {
      // its grant has no Pod at all (RBAC cannot limit a DaemonSet to its own node's)
      expect(
        (
          await kubeconfig(agentKc)
            .request<{ status: number }>('GET', '/api/v1/pods?limit=1')
            .catch((e: { status: number }) => e)
        ).status,
      ).toBe(403);
      await new Promise((r) => setTimeout(r, 500));
      expect(agent.waitingForSlices).toBe(true);
      expect(agent.ready).toBe(false);
      // ... but it knows Cascade's own pods from its namespace's Pods (a Role): no wait on itself
      expect(agent.engine.pods.get(`${SYS}/controller`)).toMatchObject({ node: 'n1', ips: [CONTROLLER] });
      controller = await startNetpolController(kubeconfig(controllerKc), {
        identity: 'c1',
        leaseNamespace: SYS,
      });
      await waitFor('the marker', async () => (agent.slices.published ? true : undefined));
      await becomes('client from its slice', CLIENT, 80, 'allow');
      expect(agent.waitingForSlices).toBe(false);
      // its own node's server came from a slice too
      expect(agent.slices.get('db/server')).toMatchObject({ node: 'n1', ips: [SERVER] });
      expect(agent.engine.pods.has('db/server')).toBe(true);
    });

    it('judges a pod of another node it knows only from a slice (named port resolved on its own pod)', async () => {
      await becomes('client from its slice', CLIENT, 80, 'allow');
      expect(await verdict(CLIENT, 81)).toBe('deny');
      expect(agent.slices.size).toBe(3); // the client, its own server, and the controller's pod
      expect(agent.slices.get('app/client')).toMatchObject({ node: 'n2', ips: [CLIENT] });
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

    it("reports findings in its node's NetpolNodeReport only; the controller posts them as Events", async () => {
      for (const name of ['first', 'second']) {
        const r = await env.call('POST', '/api/v1/namespaces/db/services', {
          apiVersion: 'v1',
          kind: 'Service',
          metadata: { name, namespace: 'db' },
          spec: { selector: { app: 'server' }, ports: [{ port: 80 }] },
        });
        expect(r.status).toBe(201);
      }
      type Report = {
        spec: { findings: { reason: string; kind: string; namespace: string; name: string }[] };
      };
      const report = await waitFor('the finding in the report of n1', async () => {
        const r = await env.call('GET', `${NODE_REPORT_PATH}/n1`);
        const body = r.body as Report;
        return r.status === 200 && body.spec.findings.length ? body : undefined;
      });
      expect(report.spec.findings).toEqual([
        expect.objectContaining({
          reason: 'ServiceBudgetExceeded',
          kind: 'Service',
          namespace: 'db',
          name: 'second',
        }),
      ]);
      const event = await waitFor('the Event the controller posted for it', async () => {
        const r = (await env.call('GET', '/api/v1/namespaces/db/events')).body as {
          items: {
            reason: string;
            involvedObject: { name: string };
            source: { component: string; host: string };
            message: string;
          }[];
        };
        return r.items.find((e) => e.reason === 'ServiceBudgetExceeded');
      });
      expect(event).toMatchObject({
        involvedObject: { name: 'second' },
        source: { component: 'cascade-netpol-agent', host: 'n1' },
      });
      expect(event.message).toMatch(/^not translated on node n1: /);
      // the agent posts no Event itself, and writes no other node's report (the admission policy)
      const own = kubeconfig(agentKc);
      expect(
        (
          await own
            .request<{ status: number }>('POST', '/api/v1/namespaces/db/events', { metadata: { name: 'x' } })
            .catch((e: { status: number }) => e)
        ).status,
      ).toBe(403);
      const forged = {
        apiVersion: 'cascade.dev/v1alpha1',
        kind: 'NetpolNodeReport',
        metadata: { name: 'n1' },
        spec: { findings: [] },
      };
      const fromN2 = await kubeconfig(otherAgentKc)
        .apply(`${NODE_REPORT_PATH}/n1`, forged, 'test')
        .catch((e: { status: number; message: string }) => e);
      expect(fromN2).toMatchObject({ status: 403 });
      expect(String((fromN2 as { message: string }).message)).toMatch(
        /only the NetpolNodeReport of the node its token is bound to/,
      );
      expect(
        await own.apply(`${NODE_REPORT_PATH}/n1`, { ...forged, spec: report.spec }, 'cascade-netpol-agent'),
      ).toBeTruthy();
    }, 60_000);
  },
);
