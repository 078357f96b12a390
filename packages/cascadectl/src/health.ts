// One health view of an install (`cascadectl doctor`): what runs, what it needs, and what to do for
// each missing piece, read from the API server in one pass. `gatherHealth` is the edge (reads);
// `diagnose` is pure (a snapshot in, checks out), so every verdict is testable from plain data.

import { ApiError, type KubeClient } from '@cascade/core/kube';
import { CONTROLLERS, GATEWAY_POLICY_KINDS } from '@cascade/distribution';
import {
  DECISION_POINTS,
  endpointSlicesPath,
  PROVIDER_TITLES,
  readyEndpoints,
  serviceOf,
  WIRING_COLLECTIONS,
} from '@cascade/wiring';

/** The gateway providers Cascade wires, by their titles (wiring names them; this file does not). */
const PROVIDERS = Object.values(PROVIDER_TITLES).join(' or ');

export type Severity = 'ok' | 'warn' | 'fail';
export interface Check {
  area: 'api' | 'crd' | 'component' | 'dependency' | 'gateway' | 'node';
  name: string;
  status: Severity;
  detail: string;
  /** What to do (for warn and fail). */
  fix?: string;
}

type Obj = {
  metadata: {
    name: string;
    namespace?: string;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
  };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
};

/** What the checks read: every list the doctor makes, as the API server answered (undefined: not served). */
export interface HealthSnapshot {
  serverVersion?: string;
  releaseNamespace: string;
  /** undefined: the user may not list CRDs. */
  crds?: Obj[];
  deployments: Obj[];
  daemonSets: Obj[];
  pods: Obj[];
  /** EndpointSlices of the decision points' Services, by `ns/name`. */
  endpointSlices: Record<string, Obj[]>;
  gatewayClasses?: Obj[];
  nodes: Obj[];
  nodeReports?: Obj[];
}

const AGENT = 'netpolicy-agent';
const WIRING = 'wiring-controller';

/** A CRD the install needs or uses: its name, why, and how bad it is to miss. */
interface Wanted {
  name: string;
  why: string;
  missing: Severity;
  fix: string;
}

const crdName = (group: string, plural: string) => `${plural}.${group}`;
const pathCrd = (path: string) => {
  const m = /^\/apis\/([^/]+)\/[^/]+\/([^/?]+)/.exec(path);
  return m ? crdName(m[1]!, m[2]!) : undefined;
};

function wantedCrds(): Wanted[] {
  const cascade = [
    'effectivepolicies',
    ...GATEWAY_POLICY_KINDS.map((k) => k.plural),
    'podaddressslices',
    'netpolnodereports',
  ].map((p) => ({
    name: crdName('cascade.dev', p),
    why: "Cascade's own",
    missing: 'fail' as const,
    fix: 'kubectl apply --server-side -f charts/cascade/crds/',
  }));
  const gateway = ['gatewayclasses', 'gateways', 'httproutes', 'grpcroutes', 'referencegrants'].map((p) => ({
    name: crdName('gateway.networking.k8s.io', p),
    why: 'Gateway API (policies attach to its objects)',
    missing: (p === 'grpcroutes' ? 'warn' : 'fail') as Severity,
    fix: 'install the Gateway API CRDs (v1.4 standard channel)',
  }));
  const netpol = ['adminnetworkpolicies', 'baselineadminnetworkpolicies', 'clusternetworkpolicies'].map(
    (p) => ({
      name: crdName('policy.networking.k8s.io', p),
      why: 'network-policy-api (admin network policies)',
      missing: 'warn' as const,
      fix:
        p === 'clusternetworkpolicies'
          ? 'helm upgrade cascade with networkPolicyAPI.install=true, or apply network-policy-api v0.3.0 (v1beta1; v0.2.x is read as v1alpha2)'
          : 'helm upgrade cascade with networkPolicyAPI.install=true, or apply network-policy-api v0.1.7',
    }),
  );
  const rendered = GATEWAY_POLICY_KINDS.flatMap((k) =>
    (k.renders ?? [])
      .filter((r) => r.group)
      .map((r) => ({
        name: crdName(r.group, r.plural),
        why: `${k.kind}'s rules are written as ${r.kind}s`,
        missing: 'warn' as const,
        fix: `install ${r.group.split('.')[0]} (its ${r.kind} CRD); until then ${k.kind}s say MissingDependency`,
      })),
  );
  const providers = WIRING_COLLECTIONS.map((c) => pathCrd(c.path))
    .filter((n): n is string => n !== undefined)
    .map((name) => ({
      name,
      why: "the gateway provider's object carrying the wasm-shim configuration",
      missing: 'warn' as const,
      fix: `install the provider (${PROVIDERS}) whose GatewayClass runs your gateways`,
    }));
  const seen = new Set<string>();
  return [...cascade, ...gateway, ...netpol, ...rendered, ...providers].filter(
    (w) => !seen.has(w.name) && seen.add(w.name),
  );
}

const versionsOf = (crd: Obj) =>
  ((crd.spec?.versions as { name: string; served?: boolean; storage?: boolean }[] | undefined) ?? [])
    .filter((v) => v.served)
    .map((v) => `${v.name}${v.storage ? '*' : ''}`)
    .join(',');

function crdChecks(s: HealthSnapshot): Check[] {
  if (!s.crds)
    return [
      {
        area: 'crd',
        name: 'CustomResourceDefinitions',
        status: 'warn',
        detail: 'cannot list them (forbidden for this user): not checked',
        fix: 'run as a cluster admin, or with a user who may list customresourcedefinitions',
      },
    ];
  const byName = new Map(s.crds.map((c) => [c.metadata.name, c]));
  const providerNames = new Set(WIRING_COLLECTIONS.map((c) => pathCrd(c.path)));
  const anyProvider = [...providerNames].some((n) => n && byName.has(n));
  return wantedCrds().map((w) => {
    const crd = byName.get(w.name);
    if (crd) {
      const bundle = Object.entries(crd.metadata.annotations ?? {}).find(([k]) =>
        k.endsWith('/bundle-version'),
      )?.[1];
      return {
        area: 'crd',
        name: w.name,
        status: 'ok',
        detail: `served ${versionsOf(crd)}${bundle ? `, bundle ${bundle}` : ''} (${w.why})`,
      };
    }
    // a provider's CRDs are needed only for the provider in use: one of them present is enough
    const status: Severity = providerNames.has(w.name) && anyProvider ? 'ok' : w.missing;
    return {
      area: 'crd',
      name: w.name,
      status,
      detail: status === 'ok' ? `not installed (another provider is) (${w.why})` : `not installed (${w.why})`,
      ...(status === 'ok' ? {} : { fix: w.fix }),
    };
  });
}

const num = (o: Obj, field: string) =>
  Number((o.status as Record<string, unknown> | undefined)?.[field] ?? 0);
const restartsOf = (pods: Obj[], app: string) =>
  pods
    .filter((p) => p.metadata.labels?.['app.kubernetes.io/name'] === app)
    .flatMap((p) => (p.status?.containerStatuses as { restartCount: number }[] | undefined) ?? [])
    .reduce((n, c) => n + (c.restartCount ?? 0), 0);

function componentChecks(s: HealthSnapshot): Check[] {
  const out: Check[] = [];
  const ns = s.releaseNamespace;
  for (const c of CONTROLLERS) {
    const d = s.deployments.find((x) => x.metadata.name === c);
    if (!d) {
      out.push({
        area: 'component',
        name: c,
        status: 'warn',
        detail: `no Deployment ${ns}/${c}`,
        fix: `switched off in the chart, or not installed: helm install cascade charts/cascade -n ${ns} (or give --release-namespace)`,
      });
      continue;
    }
    const want = Number(d.spec?.replicas ?? 1);
    const ready = num(d, 'readyReplicas');
    const restarts = restartsOf(s.pods, c);
    out.push({
      area: 'component',
      name: c,
      status: ready === 0 ? 'fail' : ready < want ? 'warn' : 'ok',
      detail: `${ready}/${want} ready${restarts ? `, ${restarts} container restart(s)` : ''}`,
      ...(ready < want
        ? { fix: `kubectl -n ${ns} describe deploy/${c}; kubectl -n ${ns} logs deploy/${c} --previous` }
        : {}),
    });
  }
  const ds = s.daemonSets.find((x) => x.metadata.name === AGENT);
  if (!ds)
    out.push({
      area: 'component',
      name: AGENT,
      status: 'warn',
      detail: `no DaemonSet ${ns}/${AGENT}: network policy is not enforced`,
      fix: 'set agent.enabled=true in the chart',
    });
  else {
    const want = num(ds, 'desiredNumberScheduled');
    const ready = num(ds, 'numberReady');
    const restarts = restartsOf(s.pods, AGENT);
    out.push({
      area: 'component',
      name: AGENT,
      status: ready < want || want === 0 ? 'fail' : 'ok',
      detail: `${ready}/${want} nodes ready${restarts ? `, ${restarts} container restart(s)` : ''}`,
      ...(ready < want || want === 0
        ? {
            fix: `kubectl -n ${ns} rollout status ds/${AGENT}; a node without a ready agent fails new pods closed`,
          }
        : {}),
    });
  }
  return out;
}

/** The decision points' addresses: the wiring-controller's flags, else the defaults. */
export function decisionPointAddresses(
  deployments: Obj[],
): { title: string; address: string; flag: string }[] {
  const args = ((
    deployments.find((d) => d.metadata.name === WIRING)?.spec?.template as {
      spec?: { containers?: { args?: string[] }[] };
    }
  )?.spec?.containers?.[0]?.args ?? []) as string[];
  const flag = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  return [
    {
      title: DECISION_POINTS.auth.title,
      flag: 'authorino-address',
      address: flag('authorino-address') ?? DECISION_POINTS.auth.address,
    },
    {
      title: DECISION_POINTS.ratelimit.title,
      flag: 'limitador-address',
      address: flag('limitador-address') ?? DECISION_POINTS.ratelimit.address,
    },
  ];
}

function dependencyChecks(s: HealthSnapshot): Check[] {
  return decisionPointAddresses(s.deployments).map(({ title, address }) => {
    const svc = serviceOf(address);
    if (!svc)
      return {
        area: 'dependency',
        name: title,
        status: 'ok',
        detail: `${address}: outside the cluster (not checked)`,
      };
    const slices = s.endpointSlices[`${svc.namespace}/${svc.name}`] ?? [];
    const ready = readyEndpoints(slices);
    return ready
      ? {
          area: 'dependency',
          name: title,
          status: 'ok',
          detail: `Service ${svc.namespace}/${svc.name}: ${ready} ready endpoint(s)`,
        }
      : {
          area: 'dependency',
          name: title,
          status: 'warn',
          detail: `Service ${svc.namespace}/${svc.name} has ${slices.length ? 'no ready endpoint' : 'no endpoints'}: its policies say MissingDependency`,
          fix: `install ${title} (Kuadrant's ${title.toLowerCase()}-operator) so that ${address} answers, or point the chart's wiring address at it`,
        };
  });
}

function gatewayChecks(s: HealthSnapshot): Check[] {
  if (!s.gatewayClasses) return [];
  if (!s.gatewayClasses.length)
    return [
      {
        area: 'gateway',
        name: 'GatewayClasses',
        status: 'warn',
        detail: 'none: no gateway controller has been installed',
        fix: `install ${PROVIDERS} (the providers Cascade wires)`,
      },
    ];
  return s.gatewayClasses.map((gc) => {
    const accepted = ((gc.status?.conditions as { type: string; status: string }[] | undefined) ?? []).find(
      (c) => c.type === 'Accepted',
    );
    const ok = accepted?.status === 'True';
    return {
      area: 'gateway',
      name: `GatewayClass ${gc.metadata.name}`,
      status: ok ? 'ok' : 'warn',
      detail: `controllerName ${String(gc.spec?.controllerName ?? '?')}, Accepted=${accepted?.status ?? 'Unknown'}`,
      ...(ok
        ? {}
        : { fix: 'its controller is not running (or not installed): its Gateways are never programmed' }),
    };
  });
}

function nodeChecks(s: HealthSnapshot): Check[] {
  const reports = new Map((s.nodeReports ?? []).map((r) => [r.metadata.name, r]));
  const agentOf = (r: Obj | undefined) =>
    (r?.spec?.agent as { version: string; program: string; cniChain: string } | undefined) ?? undefined;
  const programs = new Set([...reports.values()].map((r) => agentOf(r)?.program).filter(Boolean));
  return s.nodes.map((n) => {
    const a = agentOf(reports.get(n.metadata.name));
    if (!a)
      return {
        area: 'node',
        name: n.metadata.name,
        status: 'warn',
        detail: 'no agent has reported (none runs here yet, or an older agent)',
        fix: `kubectl -n ${s.releaseNamespace} get pods -l app.kubernetes.io/name=${AGENT} -o wide`,
      };
    const problems = [
      ...(a.cniChain === 'absent'
        ? ['cascade-cni is not in the CNI chain: new pods are not enforced at creation']
        : []),
      ...(programs.size > 1 ? ['agents run different programs (an upgrade in progress?)'] : []),
    ];
    return {
      area: 'node',
      name: n.metadata.name,
      status: problems.length ? 'warn' : 'ok',
      detail: `agent ${a.version}, program ${a.program}, CNI chain ${a.cniChain}${problems.length ? `; ${problems.join('; ')}` : ''}`,
      ...(problems.length
        ? {
            fix: "restart the node's agent (its init container chains cascade-cni) and wait for the DaemonSet rollout",
          }
        : {}),
    };
  });
}

/** Every check of the install, from one snapshot. */
export function diagnose(s: HealthSnapshot): Check[] {
  return [
    {
      area: 'api',
      name: 'API server',
      status: 'ok',
      detail: `reachable, ${s.serverVersion ?? 'version unknown'}`,
    },
    ...crdChecks(s),
    ...componentChecks(s),
    ...dependencyChecks(s),
    ...gatewayChecks(s),
    ...nodeChecks(s),
  ];
}

async function items(client: KubeClient, path: string): Promise<Obj[] | undefined> {
  try {
    return (await client.request<{ items: Obj[] }>('GET', path)).items;
  } catch (e) {
    if (e instanceof ApiError && (e.status === 404 || e.status === 403)) return undefined;
    throw e;
  }
}

/** Reads what the checks need (each list once). Throws when the API server cannot be reached. */
export async function gatherHealth(client: KubeClient, releaseNamespace: string): Promise<HealthSnapshot> {
  const version = await client.request<{ gitVersion?: string }>('GET', '/version');
  const ns = encodeURIComponent(releaseNamespace);
  const [crds, deployments, daemonSets, pods, gatewayClasses, nodes, nodeReports] = await Promise.all([
    items(client, '/apis/apiextensions.k8s.io/v1/customresourcedefinitions'),
    items(client, `/apis/apps/v1/namespaces/${ns}/deployments`),
    items(client, `/apis/apps/v1/namespaces/${ns}/daemonsets`),
    items(client, `/api/v1/namespaces/${ns}/pods`),
    items(client, '/apis/gateway.networking.k8s.io/v1/gatewayclasses'),
    items(client, '/api/v1/nodes'),
    items(client, '/apis/cascade.dev/v1alpha1/netpolnodereports'),
  ]);
  const endpointSlices: Record<string, Obj[]> = {};
  for (const { address } of decisionPointAddresses(deployments ?? [])) {
    const svc = serviceOf(address);
    if (!svc) continue;
    endpointSlices[`${svc.namespace}/${svc.name}`] = (await items(client, endpointSlicesPath(svc))) ?? [];
  }
  return {
    ...(version.gitVersion ? { serverVersion: version.gitVersion } : {}),
    releaseNamespace,
    ...(crds ? { crds } : {}),
    deployments: deployments ?? [],
    daemonSets: daemonSets ?? [],
    pods: pods ?? [],
    endpointSlices,
    ...(gatewayClasses ? { gatewayClasses } : {}),
    nodes: nodes ?? [],
    ...(nodeReports ? { nodeReports } : {}),
  };
}
