// ClusterNetworkPolicy across network-policy-api's versions, against kube-apiserver: the controller
// reads v1alpha2 where only network-policy-api v0.2.0's CRD is installed, keeps every object and its
// status through the upgrade to v0.3.0's CRD (v1beta1 stored, both served), and reads v1beta1 from
// then on without counting an object twice or writing anything it wrote before. A policy stored under
// v0.2.0 that v1beta1 refuses (a network with host bits set) keeps its meaning and is named in an Event.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { effectivePolicyCrd } from '@cascade/core';
import { createNamespace } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, envtestPaths, olderCrdDir, waitFor } from '@cascade/envtest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { controllerClient, startNetpolController } from '../../test/fixtures.ts';
import { podAddressSliceCrd } from '../cluster/slices.ts';
import type { NetpolController } from './controller.ts';

const CRD = 'clusternetworkpolicies.policy.networking.k8s.io';
const CRD_FILE = 'policy.networking.k8s.io_clusternetworkpolicies.yaml';
const path = (v: string) => `/apis/policy.networking.k8s.io/${v}/clusternetworkpolicies`;
type Cond = { type: string; status: string; reason: string; message: string; lastTransitionTime: string };

describe.skipIf(!apiServerTestsEnabled())(
  'ClusterNetworkPolicy v1alpha2 and v1beta1 against kube-apiserver',
  () => {
    let env: Envtest;
    const controllers: NetpolController[] = [];
    let start: () => Promise<NetpolController>;
    const cnp = (name: string, network: string) => ({
      apiVersion: 'policy.networking.k8s.io/v1alpha2',
      kind: 'ClusterNetworkPolicy',
      metadata: { name },
      spec: {
        tier: 'Admin',
        priority: 10,
        subject: { namespaces: { matchLabels: { team: 'shop' } } },
        egress: [{ name: 'no-range', action: 'Deny', to: [{ networks: [network] }] }],
      },
    });
    const conditions = async (v: string, name: string) =>
      ((await env.call('GET', `${path(v)}/${name}`)).body as { status?: { conditions?: Cond[] } }).status
        ?.conditions ?? [];
    const events = async () =>
      (
        (await env.call('GET', '/api/v1/namespaces/default/events')).body as {
          items: {
            involvedObject: { kind: string; name: string; apiVersion: string };
            reason: string;
            message: string;
          }[];
        }
      ).items.filter((e) => e.involvedObject.kind === 'ClusterNetworkPolicy');

    beforeAll(async () => {
      env = await Envtest.start({
        crdObjects: [effectivePolicyCrd, podAddressSliceCrd],
        skipCrds: [CRD],
        crdDirs: [olderCrdDir('v0.2.0')],
      });
      await createNamespace(env, 'shop', { team: 'shop' });
      await env.call('POST', '/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1' } });
      await env.runningPod('shop', 'cart', { node: 'n1', ip: '10.71.0.5', labels: { app: 'cart' } });
      const SYS = 'cascade-system';
      const client = await controllerClient(env);
      start = async () => {
        const c = await startNetpolController(client, {
          identity: `c${controllers.length}`,
          leaseNamespace: SYS,
        });
        controllers.push(c);
        return c;
      };
    }, 120_000);

    afterAll(async () => {
      for (const c of controllers) await c.stop().catch(() => {});
      await env?.stop();
    });

    it('v0.2.0 installed: v1alpha2 read, status written; v1beta1 is not served', async () => {
      expect((await env.call('GET', path('v1beta1'))).status).toBe(404);
      for (const [name, net] of [
        ['canonical', '203.0.113.0/24'],
        ['host-bits', '198.51.100.7/24'],
      ] as const)
        expect((await env.call('POST', path('v1alpha2'), cnp(name, net))).status).toBe(201);
      const c = await start();
      await waitFor('status on both', async () =>
        (await conditions('v1alpha2', 'canonical')).length &&
        (await conditions('v1alpha2', 'host-bits')).length
          ? true
          : undefined,
      );
      expect((await conditions('v1alpha2', 'canonical')).find((x) => x.type === 'Accepted')).toMatchObject({
        status: 'True',
        message: 'the policy is valid',
      });
      const warned = (await conditions('v1alpha2', 'host-bits')).find((x) => x.type === 'Accepted')!;
      expect(warned.status).toBe('True');
      expect(warned.message).toContain(
        'spec.egress[0].to[0].networks[0]: "198.51.100.7/24" has host bits set, which ClusterNetworkPolicy v1beta1 refuses',
      );
      const ev = await waitFor('an Event naming the field', async () =>
        (await events()).find((e) => e.involvedObject.name === 'host-bits'),
      );
      expect(ev).toMatchObject({
        reason: 'AcceptedWithWarnings',
        involvedObject: { apiVersion: 'policy.networking.k8s.io/v1alpha2' },
      });
      expect(ev.message).toContain('enforced as 198.51.100.0/24: write that');
      expect((await events()).filter((e) => e.involvedObject.name === 'canonical')).toEqual([]);
      await c.stop();
    }, 60_000);

    it("upgraded to v0.3.0's CRD: every object kept, read as v1beta1 once, nothing written again", async () => {
      const before = await conditions('v1alpha2', 'host-bits');
      const newer = parse(readFileSync(join(envtestPaths()!.crds, CRD_FILE), 'utf8')) as {
        metadata: Record<string, unknown>;
      };
      const live = (await env.call('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${CRD}`))
        .body as { metadata: { resourceVersion: string } };
      newer.metadata.resourceVersion = live.metadata.resourceVersion;
      const put = await env.call(
        'PUT',
        `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${CRD}`,
        newer,
      );
      expect(put.status).toBe(200);
      await waitFor('v1beta1 served', async () =>
        (await env.call('GET', path('v1beta1'))).status === 200 ? true : undefined,
      );
      // v1beta1 refuses what v0.2.0 accepted; the stored object stays, and so does its meaning
      const refused = await env.call('POST', path('v1beta1'), {
        ...cnp('new-host-bits', '192.0.2.9/24'),
        apiVersion: 'policy.networking.k8s.io/v1beta1',
      });
      expect(refused.status).toBe(422);
      expect(JSON.stringify(refused.body)).toContain('Invalid CIDR format provided');
      const eventsBefore = (await events()).length;
      const c = await start();
      await c.idle();
      await new Promise((r) => setTimeout(r, 1000));
      await c.idle();
      const inf = (
        c as unknown as { policyInformers: Map<string, { path: string; cache: Map<string, unknown> }> }
      ).policyInformers.get('ClusterNetworkPolicy')!;
      expect(inf.path).toBe(path('v1beta1'));
      expect([...inf.cache.keys()].sort()).toEqual(['canonical', 'host-bits']);
      // the same conditions, not written again (their transition times unchanged), and no new Event
      expect(await conditions('v1beta1', 'host-bits')).toEqual(before);
      expect((await events()).length).toBe(eventsBefore);
      // a change read through v1beta1 is answered in v1beta1
      const edited = await env.call('PUT', `${path('v1beta1')}/canonical`, {
        ...((await env.call('GET', `${path('v1beta1')}/canonical`)).body as object),
        spec: { ...cnp('canonical', '203.0.113.0/25').spec },
      });
      expect(edited.status).toBe(200);
      await waitFor('the edit observed', async () => {
        const o = (await env.call('GET', `${path('v1beta1')}/canonical`)).body as {
          metadata: { generation: number };
          status?: { conditions?: { observedGeneration?: number }[] };
        };
        return o.status?.conditions?.every((x) => x.observedGeneration === o.metadata.generation)
          ? true
          : undefined;
      });
    }, 90_000);
  },
);
