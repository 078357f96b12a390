// What Cascade wrote into a cluster, found and removed after `helm uninstall` (`cascadectl cleanup`).
// Helm deletes what the chart created; the controllers' own output outlives them: EffectivePolicies
// (owned by routes and gateways that stay), AuthConfigs, Limitador ConfigMaps (in Limitador's
// namespace, no owner), the wiring objects, PodAddressSlices, NetpolNodeReports (owned by Nodes),
// the leader Leases, the `<Kind>Affected` conditions on Gateways and routes, and Cascade's limits in
// limitador-operator's Limitador. Everything is found by the labels and field managers the
// controllers write, never by the settings of one release, so what a changed setting left behind
// (the ConfigMaps of an earlier `limitadorNamespace`) is found too. Nothing Cascade did not write is
// touched: objects without Cascade's labels stay, other managers' conditions and fields stay.
//
// What fails closed: removing the AuthConfigs and the wiring objects ends enforcement at the
// gateways (as uninstalling Kuadrant does); the network datapath's programs and pins are the node's
// and stay, enforcing the last maps, until `rm -r /sys/fs/bpf/cascade` and a pod restart (README).
import { MANAGED_BY } from '../effective/effective-policy.ts';
import { PROVIDER_RESOURCES } from '../wiring/providers.ts';
import { ApiError, type KubeClient, type KubeObject } from './client.ts';
import { POLICY_CONTROLLER_NAME } from './target-status.ts';
import { WIRING_LABEL_KEY } from './wiring-state.ts';

/** The controllers a release runs (their field managers and Lease names), as the chart names them. */
export const CASCADE_CONTROLLERS = [
  'authpolicy-controller',
  'ratelimitpolicy-controller',
  'wiring-controller',
  'netpolicy-controller',
] as const;

/** The policy kinds whose `<Kind>Affected` conditions Cascade writes on Gateways. */
const AFFECTED_KINDS = [
  ['AuthPolicy', 'authpolicy-controller'],
  ['RateLimitPolicy', 'ratelimitpolicy-controller'],
] as const;

const GW = '/apis/gateway.networking.k8s.io/v1';

/** Collections of objects to delete: list path (with the selector that makes them Cascade's). */
const OWNED: { what: string; path: string }[] = [
  {
    what: 'EffectivePolicy',
    path: `/apis/cascade.dev/v1alpha1/effectivepolicies?labelSelector=${encodeURIComponent(MANAGED_BY)}`,
  },
  {
    what: 'AuthConfig',
    path: `/apis/authorino.kuadrant.io/v1beta3/authconfigs?labelSelector=${encodeURIComponent(MANAGED_BY)}`,
  },
  { what: 'ConfigMap', path: `/api/v1/configmaps?labelSelector=${encodeURIComponent(MANAGED_BY)}` },
  ...Object.values(PROVIDER_RESOURCES)
    .flat()
    .map((r) => ({
      what: r.kind,
      path: `/apis/${r.group}/${r.version}/${r.plural}?labelSelector=${encodeURIComponent(WIRING_LABEL_KEY)}`,
    })),
  // Cascade's own CRDs: every object is Cascade's
  { what: 'PodAddressSlice', path: '/apis/cascade.dev/v1alpha1/podaddressslices' },
  { what: 'NetpolNodeReport', path: '/apis/cascade.dev/v1alpha1/netpolnodereports' },
];

export interface CleanupReport {
  /** What was (or, dry, would be) removed: `Kind ns/name` or `Kind name: what`. */
  removed: string[];
  /** Resources not served (nothing of theirs can exist). */
  notServed: string[];
  /** What could not be removed, with the API server's answer. */
  failed: string[];
}

const itemPath = (list: string, o: KubeObject) => {
  const base = list.split('?')[0]!;
  const slash = base.lastIndexOf('/');
  const ns = o.metadata.namespace ? `/namespaces/${o.metadata.namespace}` : '';
  return `${base.slice(0, slash)}${ns}${base.slice(slash)}/${o.metadata.name}`;
};
const named = (kind: string, o: KubeObject) =>
  `${kind} ${o.metadata.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata.name}`;

async function list(client: KubeClient, path: string): Promise<KubeObject[] | undefined> {
  try {
    return (await client.request<{ items: KubeObject[] }>('GET', path)).items;
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return undefined;
    throw e;
  }
}

/**
 * Removes what Cascade's controllers wrote (see the file's comment); `releaseNamespace` holds the
 * leader Leases; `limitador` (ns/name) the Limitador CR whose limits Cascade wrote, if any. `dry`:
 * report only. Meant for after `helm uninstall` (running controllers would write it all again).
 */
export async function cleanupCluster(
  client: KubeClient,
  opts: { releaseNamespace: string; limitador?: string; dry?: boolean },
): Promise<CleanupReport> {
  const report: CleanupReport = { removed: [], notServed: [], failed: [] };
  const attempt = async (what: string, f: () => Promise<unknown>) => {
    try {
      if (!opts.dry) await f();
      report.removed.push(what);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return; // gone meanwhile
      report.failed.push(`${what}: ${e instanceof ApiError ? e.message : String(e)}`.slice(0, 300));
    }
  };
  for (const { what, path } of OWNED) {
    const items = await list(client, path);
    if (!items) {
      report.notServed.push(what);
      continue;
    }
    for (const o of items) await attempt(named(what, o), () => client.request('DELETE', itemPath(path, o)));
  }
  for (const c of CASCADE_CONTROLLERS) {
    const path = `/apis/coordination.k8s.io/v1/namespaces/${opts.releaseNamespace}/leases/${c}-leader`;
    const live = await client.request('GET', path).catch(() => undefined);
    if (live)
      await attempt(`Lease ${opts.releaseNamespace}/${c}-leader`, () => client.request('DELETE', path));
  }
  // <Kind>Affected on Gateways: our field manager applies no condition, which removes ours only
  for (const g of (await list(client, `${GW}/gateways`)) ?? []) {
    const types = new Set(
      ((g.status as { conditions?: { type: string }[] } | undefined)?.conditions ?? []).map((c) => c.type),
    );
    for (const [kind, controller] of AFFECTED_KINDS)
      if (types.has(`${kind}Affected`))
        await attempt(`${kind}Affected on Gateway ${g.metadata.namespace}/${g.metadata.name}`, () =>
          client.apply(
            `${GW}/namespaces/${g.metadata.namespace}/gateways/${g.metadata.name}/status`,
            {
              apiVersion: 'gateway.networking.k8s.io/v1',
              kind: 'Gateway',
              metadata: { name: g.metadata.name, namespace: g.metadata.namespace },
              status: { conditions: [] },
            },
            `${controller}-affected`,
          ),
        );
  }
  // ... and on routes: our entries of status.parents (controllerName cascade.dev/policy-controller)
  for (const plural of ['httproutes', 'grpcroutes'])
    for (const r of (await list(client, `${GW}/${plural}`)) ?? []) {
      const parents = (r.status as { parents?: { controllerName?: string }[] } | undefined)?.parents ?? [];
      if (!parents.some((p) => p.controllerName === POLICY_CONTROLLER_NAME)) continue;
      await attempt(
        `Affected conditions on ${plural === 'httproutes' ? 'HTTPRoute' : 'GRPCRoute'} ${r.metadata.namespace}/${r.metadata.name}`,
        () =>
          // the resourceVersion read makes a concurrent writer's change fail this (409), not lose it
          client.request(
            'PUT',
            `${GW}/namespaces/${r.metadata.namespace}/${plural}/${r.metadata.name}/status`,
            {
              ...r,
              status: {
                ...(r.status as object),
                parents: parents.filter((p) => p.controllerName !== POLICY_CONTROLLER_NAME),
              },
            },
          ),
      );
    }
  // Cascade's limits in limitador-operator's Limitador: its field manager applies none
  if (opts.limitador) {
    const [ns, name] = opts.limitador.split('/') as [string, string];
    const path = `/apis/limitador.kuadrant.io/v1alpha1/namespaces/${ns}/limitadors/${name}`;
    const live = await client.request('GET', path).catch(() => undefined);
    if (live)
      await attempt(`Limitador ${ns}/${name}: Cascade's limits`, () =>
        client.apply(
          path,
          {
            apiVersion: 'limitador.kuadrant.io/v1alpha1',
            kind: 'Limitador',
            metadata: { name, namespace: ns },
          },
          'ratelimitpolicy-controller',
        ),
      );
  }
  return report;
}
