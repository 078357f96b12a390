// The agent finds pod interfaces by itself and keeps every live pod attached, whatever pod owners
// write: real veths with /32 routes (a routed CNI such as ptp or Calico), pods in a real kube-apiserver,
// the real program attached at tc, checked against the kernel's own list of tc filters.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { addr16, buildPacket, decodeEndpointValue } from '@cascade/bpf-datapath';
import { freshDatapath, kernelTestsEnabled } from '@cascade/bpf-datapath/testing';
import { createNamespace } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, waitFor } from '@cascade/envtest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent } from '../../test/fixtures.ts';
import { type Finding, NODE_REPORT_PATH, netpolNodeReportCrd } from '../cluster/node-report.ts';
import type { NetpolAgent } from './agent.ts';

const IFS = ['cascade-g0', 'cascade-g1', 'cascade-g2'];
const IPS = ['10.62.0.1', '10.62.0.2', '10.62.0.3'];
const ip = (...args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
const quiet = (...args: string[]) => {
  try {
    ip(...args);
  } catch {}
};
const ifindex = (name: string) => Number(readFileSync(`/sys/class/net/${name}/ifindex`, 'utf8'));

/** What a pod owner may write: a newline (a second bpfctl command), a victim's veth, long, unicode. */
const HOSTILE = [
  'cascade-g1\nload /tmp/evil.o /sys/fs/bpf/evil',
  'cascade-g1',
  'cascade-g2-but-longer-than-fifteen',
  'veth\u202ecascade',
  '../../sys/fs/bpf/cascade',
];

describe.skipIf(!(apiServerTestsEnabled() && kernelTestsEnabled()))(
  'the agent attaches to interfaces it finds in the kernel, never to what pods name',
  () => {
    let env: Envtest;
    /** What the agent's NetpolNodeReport says now. */
    const findings = async (): Promise<Finding[]> => {
      const r = await env.call('GET', `${NODE_REPORT_PATH}/n1`);
      return r.status === 200 ? (r.body as { spec: { findings: Finding[] } }).spec.findings : [];
    };
    let dp: Awaited<ReturnType<typeof freshDatapath>>;
    let agent: NetpolAgent;

    const createPod = async (
      name: string,
      podIP: string | undefined,
      opts: { annotation?: string; phase?: string; hostNetwork?: boolean } = {},
    ) => {
      const r = await env.call('POST', '/api/v1/namespaces/app/pods', {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name,
          namespace: 'app',
          labels: { app: name },
          ...(opts.annotation ? { annotations: { 'cascade.dev/host-interface': opts.annotation } } : {}),
        },
        spec: {
          nodeName: 'n1',
          ...(opts.hostNetwork ? { hostNetwork: true } : {}),
          containers: [{ name: 'c', image: 'example/c' }],
        },
      });
      expect(r.status).toBe(201);
      if (!podIP) return;
      const s = await env.call('PUT', `/api/v1/namespaces/app/pods/${name}/status`, {
        ...(r.body as object),
        status: { phase: opts.phase ?? 'Running', podIP, podIPs: [{ ip: podIP }] },
      });
      expect(s.status).toBe(200);
    };
    const deletePod = (name: string) =>
      env.call('DELETE', `/api/v1/namespaces/app/pods/${name}?gracePeriodSeconds=0`);
    const attachedNow = async () => {
      const a = await dp.dp.attachments();
      return new Set([...a].filter(([, v]) => v.ingress && v.egress).map(([i]) => i));
    };
    const endpointIfindex = async (podIP: string) => {
      const [line] = await dp.dp.ctl.send(`lookup cascade_endpoints ${addr16(podIP).toString('hex')}`);
      const v = line!.split(' ')[1]!;
      return v === 'none' ? undefined : decodeEndpointValue(Buffer.from(v, 'hex')).ifindex;
    };

    beforeAll(async () => {
      for (const [i, name] of IFS.entries()) {
        quiet('link', 'del', name);
        ip('link', 'add', name, 'type', 'veth', 'peer', 'name', `${name}p`);
        ip('link', 'set', name, 'up');
        ip('link', 'set', `${name}p`, 'up');
        ip('route', 'add', `${IPS[i]}/32`, 'dev', name);
      }
      env = await Envtest.start({ crdObjects: [netpolNodeReportCrd] });
      await createNamespace(env, 'app');
      await env.call('POST', '/api/v1/nodes', {
        apiVersion: 'v1',
        kind: 'Node',
        metadata: { name: 'n1' },
      });
      const node = (await env.call('GET', '/api/v1/nodes/n1')).body as object;
      await env.call('PUT', '/api/v1/nodes/n1/status', {
        ...node,
        status: { addresses: [{ type: 'InternalIP', address: '10.62.1.1' }] },
      });
      for (const [i, podIP] of IPS.entries()) await createPod(`p${i}`, podIP);
      for (const [i, a] of HOSTILE.entries())
        await createPod(`evil${i}`, `10.62.0.${100 + i}`, { annotation: a });
      dp = await freshDatapath();
      agent = await startAgent(env, dp.dp, { namespaceEntryBudget: 500 });
    }, 120_000);

    afterAll(async () => {
      await agent?.stop();
      for (const name of IFS) {
        await dp?.dp.detach(name).catch(() => {});
        quiet('link', 'del', name);
      }
      await dp?.cleanup();
      await env?.stop();
    });

    it('finds each pod veth from its route, binds the endpoint to it and attaches there; hostile annotations change nothing', async () => {
      const want = new Set(IFS.map(ifindex));
      await waitFor('every pod attached', async () => {
        const have = await attachedNow();
        return [...want].every((i) => have.has(i)) ? true : undefined;
      });
      // nothing else was attached: not the uplink, not loopback, not what annotations named
      expect(await attachedNow()).toEqual(want);
      for (const [i, podIP] of IPS.entries()) expect(await endpointIfindex(podIP)).toBe(ifindex(IFS[i]!));
      // the annotated pods have no interface in the kernel: no endpoint, nothing attached for them
      expect(await endpointIfindex('10.62.0.100')).toBeUndefined();
      // bpfctl still answers one command per line (no smuggled command ran)
      expect((await dp.dp.ctl.send('lookup cascade_config 00000000'))[0]).toMatch(/^ok /);
    });

    it('deleting and re-creating pods while attachments churn leaves every live pod attached', async () => {
      for (let round = 0; round < 4; round++) {
        // a pod owner names the victim's veth and deletes their pod (the old detach attack), while the
        // victim's pod is recreated with the same address
        await createPod(`churn${round}`, `10.62.0.${150 + round}`, { annotation: IFS[round % 3] });
        await deletePod(`churn${round}`);
        await deletePod('p1');
        await waitFor('p1 gone', async () => (agent.engine.pods.has('app/p1') ? undefined : true));
        await createPod('p1', IPS[1]);
        await waitFor('p1 back', async () => (agent.engine.pods.has('app/p1') ? true : undefined));
      }
      await agent.idle();
      const want = new Set(IFS.map(ifindex));
      await waitFor('every live pod attached', async () => {
        const have = await attachedNow();
        return [...want].every((i) => have.has(i)) ? true : undefined;
      });
      expect(await endpointIfindex(IPS[1]!)).toBe(ifindex(IFS[1]!));
      // a filter removed behind the agent's back is put back by the periodic reconcile (kernel drift)
      await dp.dp.detach(IFS[2]!);
      expect((await attachedNow()).has(ifindex(IFS[2]!))).toBe(false);
      await agent.housekeeping();
      await agent.housekeeping();
      await agent.housekeeping();
      await waitFor('re-attached', async () =>
        (await attachedNow()).has(ifindex(IFS[2]!)) ? true : undefined,
      );
    });

    it('finished and hostNetwork pods own no address; two live owners: the newest wins and it is counted', async () => {
      await createPod('done', IPS[0], { phase: 'Succeeded' });
      await createPod('hostnet', '10.62.1.1', { hostNetwork: true });
      await agent.idle();
      expect(agent.engine.pods.get('app/p0')?.ips).toEqual([IPS[0]]);
      expect(agent.engine.pods.has('app/done')).toBe(false);
      expect(agent.engine.pods.has('app/hostnet')).toBe(false);
      // the node keeps its address (node identity) in the ipcache
      expect(agent.engine.ipcache('n1').some((e) => e.identity === 1)).toBe(true);
      const before = agent.addressConflicts.get();
      await new Promise((r) => setTimeout(r, 1100)); // a newer creationTimestamp (seconds)
      await createPod('dup', IPS[0]);
      await waitFor('newest owns the address', async () =>
        agent.engine.pods.get('app/dup')?.ips[0] === IPS[0] && !agent.engine.pods.has('app/p0')
          ? true
          : undefined,
      );
      expect(agent.addressConflicts.get()).toBe(before + 1);
      // in the node's report (the controller posts it as an Event: agent-slices.integration.test.ts)
      await waitFor('the finding on the pod that lost its address', async () =>
        (await findings()).some(
          (f) => f.reason === 'PodAddressConflict' && f.kind === 'Pod' && f.name === 'p0',
        )
          ? true
          : undefined,
      );
      expect(await agent.metrics.render()).toMatch(/\ncascade_datapath_address_conflicts_total 1/);
      await deletePod('dup');
      await waitFor('old owner back', async () =>
        agent.engine.pods.get('app/p0')?.ips[0] === IPS[0] ? true : undefined,
      );
    });

    it("a tenant's NetworkPolicy over the namespace budget is refused alone: reported, and its pod stays isolated", async () => {
      const p0 = ifindex(IFS[0]!);
      const probe = async (src: string, dport: number) =>
        (
          await dp.dp.run(
            'to_endpoint',
            buildPacket({ src, dst: IPS[0]!, proto: 6, sport: 40000 + dport, dport }),
            1,
            p0,
          )
        ).retval === 2
          ? 'deny'
          : 'allow';
      await waitFor('p0 bound to its veth', async () =>
        (await endpointIfindex(IPS[0]!)) === p0 ? true : undefined,
      );
      // no policy selects p0 yet: open, once the agent has written p0's endpoint back (the previous
      // test gave its address to another pod and back; its ifindex alone does not say the sync is done)
      await agent.idle();
      await waitFor('p0 open', async () => {
        await dp.dp.clearConntrack();
        return (await probe('172.16.1.9', 443)) === 'allow' ? true : undefined;
      });
      const np = (name: string, from: object[]) => ({
        apiVersion: 'networking.k8s.io/v1',
        kind: 'NetworkPolicy',
        metadata: { name, namespace: 'app' },
        spec: {
          podSelector: { matchLabels: { app: 'p0' } },
          ingress: [{ from, ports: [{ port: 80 }, { port: 443 }, { port: 8080 }] }],
        },
      });
      const blocks = Array.from({ length: 300 }, (_, i) => ({
        ipBlock: { cidr: `172.${16 + (i >> 8)}.${i & 255}.0/24` },
      }));
      const path = '/apis/networking.k8s.io/v1/namespaces/app/networkpolicies';
      expect((await env.call('POST', path, np('flood', blocks))).status).toBe(201);
      expect(
        (await env.call('POST', path, np('from-router', [{ ipBlock: { cidr: '10.62.9.1/32' } }]))).status,
      ).toBe(201);
      await waitFor('refused', async () =>
        agent.refusedPolicies.has('NetworkPolicy/app/flood') ? true : undefined,
      );
      await agent.idle();
      expect(agent.refusedPolicies.get('NetworkPolicy/app/flood')!.reason).toMatch(/over its budget of 500/);
      expect(await agent.metrics.render()).toMatch(/\ncascade_netpol_policies_refused 1\n/);
      await waitFor('the finding on the refused policy', async () =>
        (await findings()).some(
          (f) =>
            f.reason === 'PolicyMapBudgetExceeded' &&
            f.kind === 'NetworkPolicy' &&
            f.name === 'flood' &&
            /over its budget of 500/.test(f.message),
        )
          ? true
          : undefined,
      );
      await dp.dp.clearConntrack();
      expect(await probe('172.16.1.9', 443)).toBe('deny'); // isolated, the refused rule allows nothing
      expect(await probe('10.62.9.1', 443)).toBe('allow'); // the namespace's other policy works
      expect((await env.call('DELETE', `${path}/flood`)).status).toBe(200);
      await waitFor('no longer refused', async () => (agent.refusedPolicies.size === 0 ? true : undefined));
    });
  },
);
