// Staged policies in the node agent's datapath: a real kube-apiserver with the Staged* CRDs and the
// real BPF program. A StagedNetworkPolicy never changes a verdict; the kernel judges new flows by the
// staged set too, and the agent's flow log and metrics say what it would change, naming the staged
// rule; a staged Delete shows what the policy's removal would allow; unstaged, the node holds
// nothing of it.
import { COUNTERS, FixedInterface, TCP_FLAGS, TEST_RUN_IFINDEX } from '@cascade/bpf-datapath';
import { freshDatapath, kernelTestsEnabled, kernelVerdict } from '@cascade/bpf-datapath/testing';
import { createNamespace } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, waitFor } from '@cascade/envtest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runningPod, startAgent } from '../../test/fixtures.ts';
import { stagedCrds } from '../cluster/staged-crds.ts';
import type { NetpolAgent } from './agent.ts';
import type { FlowRecord } from './flows.ts';

const CLIENT = '10.61.0.1';
const SERVER = '10.61.0.2';
const SNP = '/apis/cascade.dev/v1alpha1/namespaces/db/stagednetworkpolicies';

describe.skipIf(!(apiServerTestsEnabled() && kernelTestsEnabled()))(
  'staged policies in the agent datapath (kube-apiserver and the kernel)',
  () => {
    let env: Envtest;
    let dp: Awaited<ReturnType<typeof freshDatapath>>;
    let agent: NetpolAgent;
    let sport = 41000;
    /** A new flow client -> server:dport (a SYN on a fresh source port): the kernel's verdict. */
    const verdict = (dport: number) =>
      kernelVerdict(dp.dp, 'ingress', {
        src: CLIENT,
        dst: SERVER,
        proto: 6,
        sport: sport++,
        dport,
        tcpFlags: TCP_FLAGS.SYN,
      });
    const flows = async (): Promise<FlowRecord[]> => {
      await agent.drainFlows();
      const res = await fetch(`http://127.0.0.1:${agent.port}/flows?namespace=db`);
      return (await res.text())
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as FlowRecord);
    };
    const stagedEndpoints = async () =>
      Number(
        /cascade_datapath_staged_endpoints (\d+)/.exec(
          await (await fetch(`http://127.0.0.1:${agent.port}/metrics`)).text(),
        )?.[1],
      );

    beforeAll(async () => {
      env = await Envtest.start({ crdObjects: stagedCrds() });
      await createNamespace(env, 'app', { team: 'app' });
      await createNamespace(env, 'db', { team: 'db' });
      await env.call('POST', '/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1' } });
      await runningPod(env, 'app', 'client', CLIENT);
      await runningPod(env, 'db', 'server', SERVER);
      // enforced: the server admits the app namespace on 80 only
      await env.call('POST', '/apis/networking.k8s.io/v1/namespaces/db/networkpolicies', {
        apiVersion: 'networking.k8s.io/v1',
        kind: 'NetworkPolicy',
        metadata: { name: 'server-from-app', namespace: 'db' },
        spec: {
          podSelector: { matchLabels: { app: 'server' } },
          ingress: [
            { from: [{ namespaceSelector: { matchLabels: { team: 'app' } } }], ports: [{ port: 80 }] },
          ],
        },
      });
      dp = await freshDatapath();
      agent = await startAgent(env, dp.dp, {
        interfaces: new FixedInterface(TEST_RUN_IFINDEX),
        manageAttachments: false,
        metricsBindAddress: { host: '127.0.0.1', port: 0 },
      });
      await waitFor('NetworkPolicy enforced', async () =>
        (await verdict(81)) === 'deny' ? true : undefined,
      );
    }, 120_000);

    afterAll(async () => {
      await agent?.stop();
      await dp?.cleanup();
      await env?.stop();
    });

    it('a staged change that narrows the policy changes no verdict; the flow log says it would deny', async () => {
      const r = await env.call('POST', SNP, {
        apiVersion: 'cascade.dev/v1alpha1',
        kind: 'StagedNetworkPolicy',
        metadata: { name: 'server-from-app', namespace: 'db' },
        spec: {
          podSelector: { matchLabels: { app: 'server' } },
          ingress: [
            { from: [{ namespaceSelector: { matchLabels: { team: 'app' } } }], ports: [{ port: 8080 }] },
          ],
        },
      });
      expect(r.status).toBe(201);
      await waitFor('staged tables loaded', async () => ((await stagedEndpoints()) === 1 ? true : undefined));
      expect(await verdict(80)).toBe('allow');
      const marked = (await flows()).filter((f) => f.port === 80 && f.staged);
      expect(marked).toContainEqual(
        expect.objectContaining({
          from: 'app/client',
          to: 'db/server',
          verdict: 'allow',
          rule: expect.stringMatching(/^NetworkPolicy\/db\/server-from-app#ingress\[0\]/),
          // the staged set's isolation of the server decides
          staged: {
            verdict: 'deny',
            rule: expect.stringMatching(/^StagedNetworkPolicy\/db\/server-from-app/),
          },
        }),
      );
      // port 81: denied now and by the staged set too: no staged part
      expect(await verdict(81)).toBe('deny');
      const denied = (await flows()).filter((f) => f.port === 81);
      expect(denied.length).toBeGreaterThan(0);
      expect(denied.every((f) => f.staged === undefined)).toBe(true);
      const metrics = await (await fetch(`http://127.0.0.1:${agent.port}/metrics`)).text();
      expect(metrics).toMatch(
        /cascade_datapath_staged_flows_total\{policy="StagedNetworkPolicy\/db\/server-from-app",direction="ingress",verdict="deny"\} [1-9]/,
      );
    });

    it('a staged Delete of the policy: its removal would allow what it denies now (no isolation left)', async () => {
      const old = (await env.call('GET', `${SNP}/server-from-app`)).body as {
        metadata: { resourceVersion: string };
      };
      const put = await env.call('PUT', `${SNP}/server-from-app`, {
        apiVersion: 'cascade.dev/v1alpha1',
        kind: 'StagedNetworkPolicy',
        metadata: { name: 'server-from-app', namespace: 'db', resourceVersion: old.metadata.resourceVersion },
        spec: { stagedAction: 'Delete' },
      });
      expect(put.status).toBe(200);
      const f = await waitFor('staged Delete loaded', async () => {
        expect(await verdict(81)).toBe('deny');
        const m = (await flows()).filter((x) => x.port === 81 && x.staged);
        return m.length ? m : undefined;
      });
      expect(f[0]).toMatchObject({ verdict: 'deny', staged: { verdict: 'allow' } });
      expect(f[0]!.staged!.rule).toBeUndefined();
    });

    it('unstaged: no endpoint keeps staged tables and the kernel marks no flow', async () => {
      expect((await env.call('DELETE', `${SNP}/server-from-app`)).status).toBe(200);
      await waitFor('staged tables gone', async () => ((await stagedEndpoints()) === 0 ? true : undefined));
      const before = await dp.dp.counter(COUNTERS.stagedDiffer);
      expect(await verdict(80)).toBe('allow');
      expect(await verdict(81)).toBe('deny');
      expect(await dp.dp.counter(COUNTERS.stagedDiffer)).toBe(before);
    });
  },
);
