// What Cascade wrote into a cluster, found and removed after `helm uninstall` (`cascadectl cleanup`).
// Helm deletes what the chart created; the controllers' own output outlives them: EffectivePolicies
// (owned by routes and gateways that stay), what each kind renders for its enforcement component
// (some in a namespace of that component's, without an owner), the data plane's objects, the
// network-policy objects, the leader Leases, the `<Kind>Affected` conditions on Gateways and routes,
// the conditions on others' cluster-scoped objects (the admin network policies), and Cascade's fields
// in each kind's aggregate object. The packages that write each say what (the
// CleanupPlan). Everything is found by the labels and field managers the controllers write, never by
// the settings of one release, so what a changed setting left behind (objects in an earlier
// namespace setting) is found too. Nothing Cascade did not write is touched: objects without
// Cascade's labels stay, other managers' conditions and fields stay.
//
// What fails closed: removing a fail-closed kind's rendered objects and the data plane's objects ends
// enforcement at the gateways (as uninstalling Kuadrant does); the network datapath's programs and
// pins are the node's: each agent removes them when its DaemonSet is deleted (README).
import { MANAGED_BY } from '../effective/effective-policy.ts';
import type { PolicyKind } from '../kind.ts';
import { ApiError, getFirstServed, type KubeClient, type KubeObject } from '../kube/client.ts';
import { POLICY_CONTROLLER_NAME } from './target-status.ts';

/** A collection of objects to delete: its list path, with the selector that makes them Cascade's. */
export interface OwnedCollection {
  what: string;
  path: string;
}

/**
 * What a release wrote, as the packages that write it register it (the distribution's manifest
 * assembles it): each policy kind with the controller that runs it (its rendered objects, its
 * `<Kind>Affected` conditions, its aggregate object), the other collections (data-plane objects,
 * network-policy objects), and every controller (its leader Lease).
 */
export interface CleanupPlan {
  kinds: readonly { kind: PolicyKind; controller: string }[];
  collections: readonly OwnedCollection[];
  controllers: readonly string[];
  /**
   * Others' cluster-scoped objects whose status conditions a Cascade controller applied (`manager`,
   * its field manager): that manager applies none, which removes its conditions only.
   */
  conditions?: readonly ConditionsWritten[];
}

/**
 * A resource some of whose objects carry conditions a Cascade field manager applied. A resource
 * served in several versions is listed once per version, preferred first: the first one served is
 * cleaned, the others skipped.
 */
export interface ConditionsWritten {
  what: string;
  /** The cluster-scoped list path. */
  path: string;
  apiVersion: string;
  manager: string;
}

const GW = '/apis/gateway.networking.k8s.io/v1';

const selected = (path: string, selector: string) => `${path}?labelSelector=${encodeURIComponent(selector)}`;

/** The collections to delete, in order: EffectivePolicies, each kind's rendered objects, then the plan's others. */
function ownedOf(plan: CleanupPlan): OwnedCollection[] {
  const out: OwnedCollection[] = [
    { what: 'EffectivePolicy', path: selected('/apis/cascade.dev/v1alpha1/effectivepolicies', MANAGED_BY) },
  ];
  for (const { kind } of plan.kinds)
    for (const r of kind.renders ?? []) {
      const base = r.group ? `/apis/${r.group}/${r.version}` : `/api/${r.version}`;
      const path = selected(`${base}/${r.plural}`, MANAGED_BY);
      if (!out.some((o) => o.path === path)) out.push({ what: r.kind, path });
    }
  return [...out, ...plan.collections];
}

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

/** Server-side apply of no condition as `manager`: removes that manager's conditions, and only those. */
const dropConditions = (
  client: KubeClient,
  statusPath: string,
  apiVersion: string,
  kind: string,
  metadata: { name: string; namespace?: string },
  manager: string,
) => client.apply(statusPath, { apiVersion, kind, metadata, status: { conditions: [] } }, manager);

async function list(client: KubeClient, path: string): Promise<KubeObject[] | undefined> {
  try {
    return (await client.request<{ items: KubeObject[] }>('GET', path)).items;
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return undefined;
    throw e;
  }
}

/**
 * Removes what Cascade's controllers wrote (see the file's comment and `plan`); `releaseNamespace`
 * holds the leader Leases; `aggregate` (ns/name) the aggregate object (PolicyKind.aggregate) whose
 * fields Cascade wrote, if any. `dry`: report only. Meant for after `helm uninstall` (running
 * controllers would write it all again).
 */
export async function cleanupCluster(
  client: KubeClient,
  plan: CleanupPlan,
  opts: { releaseNamespace: string; aggregate?: string; dry?: boolean },
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
  for (const { what, path } of ownedOf(plan)) {
    const items = await list(client, path);
    if (!items) {
      report.notServed.push(what);
      continue;
    }
    for (const o of items) await attempt(named(what, o), () => client.request('DELETE', itemPath(path, o)));
  }
  for (const c of plan.controllers) {
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
    for (const {
      kind: { kind },
      controller,
    } of plan.kinds)
      if (types.has(`${kind}Affected`))
        await attempt(`${kind}Affected on Gateway ${g.metadata.namespace}/${g.metadata.name}`, () =>
          dropConditions(
            client,
            `${GW}/namespaces/${g.metadata.namespace}/gateways/${g.metadata.name}/status`,
            'gateway.networking.k8s.io/v1',
            'Gateway',
            { name: g.metadata.name, namespace: g.metadata.namespace },
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
  // conditions on others' cluster-scoped objects (network policies' status): their manager applies none
  for (const [what, versions] of Map.groupBy(plan.conditions ?? [], (c) => c.what)) {
    let items: KubeObject[];
    let c: ConditionsWritten;
    try {
      const served = await getFirstServed<{ items: KubeObject[] }>(
        client,
        versions.map((v) => v.path),
      );
      items = served.body.items;
      c = versions[served.index]!;
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) throw e;
      report.notServed.push(what); // no version served
      continue;
    }
    for (const o of items) {
      const ours = (o.metadata.managedFields ?? []).some(
        (f) => f.manager === c.manager && f.subresource === 'status',
      );
      if (!ours) continue;
      await attempt(`conditions on ${c.what} ${o.metadata.name}`, () =>
        dropConditions(
          client,
          `${c.path}/${o.metadata.name}/status`,
          c.apiVersion,
          c.what,
          { name: o.metadata.name },
          c.manager,
        ),
      );
    }
  }
  // Cascade's fields in each kind's aggregate object: its field manager applies none
  if (opts.aggregate) {
    const [ns, name] = opts.aggregate.split('/') as [string, string];
    for (const { kind, controller } of plan.kinds) {
      const r = kind.aggregate?.resource;
      if (!r) continue;
      const path = `/apis/${r.group}/${r.version}/namespaces/${ns}/${r.plural}/${name}`;
      const live = await client.request('GET', path).catch(() => undefined);
      if (live)
        await attempt(`${r.kind} ${ns}/${name}: Cascade's fields`, () =>
          client.apply(
            path,
            { apiVersion: `${r.group}/${r.version}`, kind: r.kind, metadata: { name, namespace: ns } },
            controller,
          ),
        );
    }
  }
  return report;
}
