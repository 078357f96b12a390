// The node agent end to end: a real kube-apiserver (namespaces, a node, pods with addresses and named
// ports, a NetworkPolicy, an AdminNetworkPolicy) and the real BPF program. Verdicts are the kernel's
// (BPF_PROG_TEST_RUN on the agent's datapath) as objects change in the API server.
import { networkInterfaces } from 'node:os';
import { addr16, buildPacket, FixedInterface, TCP_FLAGS, TEST_RUN_IFINDEX } from '@cascade/bpf-datapath';
import { freshDatapath, kernelTestsEnabled, kernelVerdict } from '@cascade/bpf-datapath/testing';
import { createNamespace } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, waitFor } from '@cascade/envtest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runningPod, startAgent } from '../../test/fixtures.ts';
import type { NetpolAgent } from './agent.ts';

/** FixedInterface whose look-ups can be held: a sync then waits inside its interface step. */
class GatedInterface extends FixedInterface {
  private held?: { promise: Promise<void>; release: () => void };
  waiting = false;
  hold(): void {
    let release = () => {};
    const promise = new Promise<void>((r) => {
      release = r;
    });
    this.held = { promise, release };
  }
  release(): void {
    this.held?.release();
    this.held = undefined;
  }
  override async resolve(addresses: readonly string[]): Promise<Map<string, number>> {
    if (this.held) {
      this.waiting = true;
      await this.held.promise;
      this.waiting = false;
    }
    return super.resolve(addresses);
  }
}

const CLIENT = '10.60.0.1';
const SERVER = '10.60.0.2';
const ANP = '/apis/policy.networking.k8s.io/v1alpha1/adminnetworkpolicies';

describe.skipIf(!(apiServerTestsEnabled() && kernelTestsEnabled()))(
  'cascade-netpol-agent against kube-apiserver and the kernel',
  () => {
    let env: Envtest;
    let dp: Awaited<ReturnType<typeof freshDatapath>>;
    let agent: NetpolAgent;
    const gated = new GatedInterface(TEST_RUN_IFINDEX);
    const verdict = (dport: number) =>
      kernelVerdict(dp.dp, 'ingress', { src: CLIENT, dst: SERVER, proto: 6, sport: 40000 + dport, dport });
    const becomes = (what: string, dport: number, want: 'allow' | 'deny') =>
      waitFor(`${what}: TCP/${dport} ${want}`, async () => {
        await dp.dp.clearConntrack();
        return (await verdict(dport)) === want ? true : undefined;
      });

    beforeAll(async () => {
      env = await Envtest.start();
      for (const [name, labels] of [
        ['app', { team: 'app' }],
        ['db', { team: 'db' }],
      ] as const)
        await createNamespace(env, name, labels);
      await env.call('POST', '/api/v1/nodes', {
        apiVersion: 'v1',
        kind: 'Node',
        metadata: { name: 'n1', labels: { zone: 'a' } },
      });
      await runningPod(env, 'app', 'client', CLIENT);
      await runningPod(env, 'db', 'server', SERVER, [{ name: 'http', containerPort: 80 }]);
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
      dp = await freshDatapath();
      // Packets go through BPF_PROG_TEST_RUN (the loopback): every pod address is bound there, and the
      // agent attaches nothing (agent.attach.integration.test.ts covers discovery and attachment).
      agent = await startAgent(env, dp.dp, {
        interfaces: gated,
        manageAttachments: false,
        // every address of the host, as `agent.metricsHost: ""` would: /metrics answers other peers
        // without the series that name tenants' policies
        metricsBindAddress: { host: '0.0.0.0', port: 0 },
      });
    }, 120_000);

    afterAll(async () => {
      await agent?.stop();
      await dp?.cleanup();
      await env?.stop();
    });

    it('enforces the NetworkPolicy from the API server in the kernel (named port resolved)', async () => {
      await becomes('NetworkPolicy', 80, 'allow');
      expect(await verdict(81)).toBe('deny');
      expect(agent.syncs.get()).toBeGreaterThan(0);
      expect(agent.entriesWritten.get()).toBeGreaterThan(0);
      expect(agent.lastReport?.refused).toEqual([]);
      // the kernel's verdict counters reach /metrics
      await agent.housekeeping();
      const text = await agent.metrics.render();
      expect(text).toMatch(/# TYPE cascade_datapath_packets_deny_total counter/);
      expect(Number(/\ncascade_datapath_packets_deny_total (\d+)/.exec(text)?.[1])).toBeGreaterThan(0);
      expect(text).toMatch(/\ncascade_datapath_packets_ct_hit_total \d+/);
      expect(text).toMatch(/\ncascade_datapath_conntrack_entries \d+/);
    });

    it('a drift check on a quiet node rebuilds no rule set; a cluster change does', async () => {
      await agent.idle();
      const built = agent.syncs.get();
      const unchanged = agent.unchangedSyncs.get();
      // three housekeeping rounds hold one drift check (every third round: 30 s)
      for (let i = 0; i < 3; i++) await agent.housekeeping();
      await agent.idle();
      expect(agent.unchangedSyncs.get()).toBeGreaterThan(unchanged);
      expect(agent.syncs.get()).toBe(built);
      const r = await env.call(
        'PATCH',
        '/api/v1/namespaces/app',
        { metadata: { labels: { team: 'app', drift: 'check' } } },
        'application/merge-patch+json',
      );
      expect(r.status).toBe(200);
      await waitFor('a rebuild after the change', async () => (agent.syncs.get() > built ? true : undefined));
      expect(await verdict(80)).toBe('allow');
      expect(await verdict(81)).toBe('deny');
    });

    it('a change that arrives while a sync is under way is built by the next sync, never taken as built', async () => {
      await agent.idle();
      gated.hold();
      try {
        // a new local pod: its address is unknown, so the sync it starts waits in the (held) look-up
        await runningPod(env, 'app', 'late', '10.60.0.9');
        await waitFor('a sync waiting on the interfaces', async () => (gated.waiting ? true : undefined));
        // meanwhile an ANP allows app -> db on TCP 81 (the NetworkPolicy's isolation denies it): the
        // agent takes it in while that sync is under way (an allow: no flow record for the next tests)
        const rev = agent.engine.policyRevision;
        const r = await env.call('POST', ANP, {
          apiVersion: 'policy.networking.k8s.io/v1alpha1',
          kind: 'AdminNetworkPolicy',
          metadata: { name: 'mid-sync' },
          spec: {
            priority: 6,
            subject: { namespaces: { matchLabels: { team: 'db' } } },
            ingress: [
              {
                name: 'app-81',
                action: 'Allow',
                from: [{ namespaces: { matchLabels: { team: 'app' } } }],
                ports: [{ portNumber: { protocol: 'TCP', port: 81 } }],
              },
            ],
          },
        });
        expect(r.status).toBe(201);
        await waitFor('the ANP in the engine', async () =>
          agent.engine.policyRevision > rev ? true : undefined,
        );
      } finally {
        gated.release();
      }
      await becomes('the ANP that came mid-sync', 81, 'allow');
      expect((await env.call('DELETE', `${ANP}/mid-sync`)).status).toBe(200);
      await becomes('the ANP deleted', 81, 'deny');
      expect((await env.call('DELETE', '/api/v1/namespaces/app/pods/late?gracePeriodSeconds=0')).status).toBe(
        200,
      );
    });

    it('an AdminNetworkPolicy Deny beats the NetworkPolicy; deleting it restores the allow', async () => {
      const r = await env.call('POST', ANP, {
        apiVersion: 'policy.networking.k8s.io/v1alpha1',
        kind: 'AdminNetworkPolicy',
        metadata: { name: 'db-lockdown' },
        spec: {
          priority: 5,
          subject: { namespaces: { matchLabels: { team: 'db' } } },
          ingress: [
            { name: 'no-app', action: 'Deny', from: [{ namespaces: { matchLabels: { team: 'app' } } }] },
          ],
        },
      });
      expect(r.status).toBe(201);
      await becomes('ANP deny', 80, 'deny');
      // the flow log names the pods and the deciding ANP rule; /flows serves it (NDJSON, filtered)
      await dp.dp.clearConntrack();
      expect(await verdict(80)).toBe('deny');
      await agent.drainFlows();
      const res = await fetch(`http://127.0.0.1:${agent.port}/flows?verdict=deny&namespace=db`);
      const flows = (await res.text())
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { from: string; to: string; rule?: string; port: number; node: string });
      expect(flows).toContainEqual(
        expect.objectContaining({
          from: 'app/client',
          to: 'db/server',
          port: 80,
          node: 'n1',
          rule: expect.stringMatching(/^AdminNetworkPolicy\/db-lockdown#ingress\[0\]/),
        }),
      );
      // the deciding policy's count: in /metrics for a loopback peer only (round three: node addresses
      // are reachable by pods, so the policy names stay off them like /flows)
      const series = /cascade_datapath_policy_flows_total\{policy="AdminNetworkPolicy\/db-lockdown"/;
      expect(await (await fetch(`http://127.0.0.1:${agent.port}/metrics`)).text()).toMatch(series);
      const away = Object.values(networkInterfaces())
        .flat()
        .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
      expect(away, 'a non-loopback IPv4 address of this host').toBeTruthy();
      const remote = await (await fetch(`http://${away}:${agent.port}/metrics`)).text();
      expect(remote).toContain('cascade_datapath_syncs_total');
      expect(remote).not.toContain('cascade_datapath_policy_flows_total');
      expect(remote).not.toContain('db-lockdown');
      expect((await env.call('DELETE', `${ANP}/db-lockdown`)).status).toBe(200);
      await becomes('ANP deleted', 80, 'allow');
    });

    it('a Service: the pod dials the ClusterIP, the kernel sends it to the backend and judges it as the backend', async () => {
      const created = await env.call('POST', '/api/v1/namespaces/db/services', {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: 'server', namespace: 'db' },
        spec: { selector: { app: 'server' }, ports: [{ name: 'http', port: 7443, targetPort: 'http' }] },
      });
      expect(created.status).toBe(201);
      const vip = (created.body as { spec: { clusterIP: string } }).spec.clusterIP;
      // envtest runs no endpoint controller: the EndpointSlice it would write
      expect(
        (
          await env.call('POST', '/apis/discovery.k8s.io/v1/namespaces/db/endpointslices', {
            apiVersion: 'discovery.k8s.io/v1',
            kind: 'EndpointSlice',
            metadata: {
              name: 'server-abc',
              namespace: 'db',
              labels: { 'kubernetes.io/service-name': 'server' },
            },
            addressType: 'IPv4',
            ports: [{ name: 'http', port: 80, protocol: 'TCP' }],
            endpoints: [
              {
                addresses: [SERVER],
                conditions: { ready: true },
                nodeName: 'n1',
                targetRef: { kind: 'Pod', namespace: 'db', name: 'server' },
              },
            ],
          })
        ).status,
      ).toBe(201);
      // the client may talk to pods of namespace db on their port "http" only
      await env.call('POST', '/apis/networking.k8s.io/v1/namespaces/app/networkpolicies', {
        apiVersion: 'networking.k8s.io/v1',
        kind: 'NetworkPolicy',
        metadata: { name: 'client-egress', namespace: 'app' },
        spec: {
          podSelector: { matchLabels: { app: 'client' } },
          policyTypes: ['Egress'],
          egress: [
            { to: [{ namespaceSelector: { matchLabels: { team: 'db' } } }], ports: [{ port: 'http' }] },
          ],
        },
      });
      const dial = () =>
        dp.dp.run(
          'from_endpoint',
          buildPacket({
            src: CLIENT,
            dst: vip,
            proto: 6,
            sport: 45000,
            dport: 7443,
            tcpFlags: TCP_FLAGS.SYN,
          }),
        );
      await waitFor('ClusterIP translated and allowed as the backend', async () => {
        await dp.dp.clearConntrack();
        const r = await dial();
        const dst = `${[...r.out.subarray(30, 34)].join('.')}:${r.out.readUInt16BE(36)}`;
        return r.retval === 0 && dst === `${SERVER}:80` ? true : undefined;
      });
      expect(agent.lastReport?.services).toMatchObject({ cut: [] });
      // the backend pod's port changes: the egress rule (port "http" of the backend) no longer matches
      await env.call(
        'PATCH',
        '/apis/discovery.k8s.io/v1/namespaces/db/endpointslices/server-abc',
        {
          ports: [{ name: 'http', port: 81, protocol: 'TCP' }],
        },
        'application/merge-patch+json',
      );
      await waitFor('backend on a port the policy does not allow: denied', async () => {
        await dp.dp.clearConntrack();
        return (await dial()).retval === 2 ? true : undefined;
      });
      await env.call('DELETE', '/apis/networking.k8s.io/v1/namespaces/app/networkpolicies/client-egress');
      await env.call('DELETE', '/api/v1/namespaces/db/services/server');
    });

    it("a namespace relabelled out of the NetworkPolicy's selector loses access; a deleted pod leaves the maps", async () => {
      const ns = (await env.call('GET', '/api/v1/namespaces/app')).body as {
        metadata: Record<string, unknown>;
      };
      await env.call('PUT', '/api/v1/namespaces/app', {
        ...ns,
        metadata: { ...ns.metadata, labels: { team: 'elsewhere' } },
      });
      await becomes('namespace relabelled', 80, 'deny');
      expect(
        (await env.call('DELETE', '/api/v1/namespaces/db/pods/server?gracePeriodSeconds=0')).status,
      ).toBe(200);
      // No endpoint for the server any more: nothing is delivered to its address on that interface.
      const key = addr16(SERVER).toString('hex');
      await waitFor('server endpoint gone', async () =>
        (await dp.dp.ctl.send(`lookup cascade_endpoints ${key}`))[0] === 'ok none' ? true : undefined,
      );
      expect(await verdict(81)).toBe('deny');
    });
  },
);
