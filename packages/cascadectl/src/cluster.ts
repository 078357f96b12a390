// Objects read from a live cluster instead of files (`--kubeconfig`, `--context`): every kind the
// commands understand, listed once, as the same manifests the file loader makes. A resource the API
// server does not serve (its CRD is not installed) is skipped; one the user may not list is a
// problem naming it (a tenant usually may not list AdminNetworkPolicies: the answer then says so).

import { ApiError, getFirstServed, KubeClient } from '@cascade/core/kube';
import { bodyOf, type LoadResult, type Manifest } from './load.ts';

/** Each resource's list path; several: its versions, preferred first (the first one served is read, once). */
const RESOURCES: (string | string[])[] = [
  '/api/v1/namespaces',
  '/api/v1/nodes',
  '/api/v1/pods',
  '/api/v1/services',
  '/apis/discovery.k8s.io/v1/endpointslices',
  '/apis/networking.k8s.io/v1/networkpolicies',
  '/apis/policy.networking.k8s.io/v1alpha1/adminnetworkpolicies',
  '/apis/policy.networking.k8s.io/v1alpha1/baselineadminnetworkpolicies',
  [
    '/apis/policy.networking.k8s.io/v1beta1/clusternetworkpolicies',
    '/apis/policy.networking.k8s.io/v1alpha2/clusternetworkpolicies',
  ],
  '/apis/gateway.networking.k8s.io/v1/gatewayclasses',
  '/apis/gateway.networking.k8s.io/v1/gateways',
  '/apis/gateway.networking.k8s.io/v1/httproutes',
  '/apis/gateway.networking.k8s.io/v1/grpcroutes',
  '/apis/gateway.networking.k8s.io/v1beta1/referencegrants',
  '/apis/cascade.dev/v1alpha1/authpolicies',
  '/apis/cascade.dev/v1alpha1/ratelimitpolicies',
  // each node's pod-bridge addresses: the source of a NodePort flow masqueraded to a local backend
  '/apis/cascade.dev/v1alpha1/netpolnodereports',
  // staged policies (netpol simulate --staged)
  '/apis/cascade.dev/v1alpha1/stagednetworkpolicies',
  '/apis/cascade.dev/v1alpha1/stagedadminnetworkpolicies',
  '/apis/cascade.dev/v1alpha1/stagedbaselineadminnetworkpolicies',
  '/apis/cascade.dev/v1alpha1/stagedclusternetworkpolicies',
];

type Item = { metadata: Manifest['metadata'] & Record<string, unknown>; spec?: unknown; status?: unknown };

export interface LiveOptions {
  kubeconfig?: string;
  context?: string;
}
let live: LiveOptions | undefined;
/** The live-cluster flags of this invocation (undefined: files only). */
export const liveOptions = (): LiveOptions | undefined => live;
export function setLiveOptions(o: LiveOptions | undefined): void {
  live = o;
}

/**
 * A client for the live-cluster flags (the context checked, one clear error for a bad kubeconfig).
 * The Kubernetes client library is loaded here, when a command goes live: it is half of what a
 * file-only invocation used to load before its first line of output.
 */
export async function clientFor(opts: LiveOptions): Promise<KubeClient> {
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kc = new KubeConfig();
  if (opts.kubeconfig) kc.loadFromFile(opts.kubeconfig);
  else kc.loadFromDefault();
  if (opts.context) {
    if (!kc.getContexts().some((c) => c.name === opts.context))
      throw new Error(`--context ${opts.context}: no such context in the kubeconfig`);
    kc.setCurrentContext(opts.context);
  }
  if (!kc.getCurrentCluster()) throw new Error('the kubeconfig names no current cluster');
  return new KubeClient(kc);
}

export interface EffectivePolicyItem {
  metadata: { name: string; namespace: string };
  spec: {
    policyKind: string;
    targetRef: { kind: string; name: string };
    sources: { namespace: string; name: string }[];
    paths: { rules: Record<string, unknown> }[];
  };
}

/** Published EffectivePolicies (in one namespace, or all). */
export async function readEffectivePolicies(
  opts: LiveOptions,
  namespace?: string,
): Promise<EffectivePolicyItem[]> {
  const ns = namespace ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  const list = await (await clientFor(opts)).request<{ items: EffectivePolicyItem[] }>(
    'GET',
    `/apis/cascade.dev/v1alpha1${ns}/effectivepolicies`,
  );
  return list.items.sort((a, b) =>
    `${a.metadata.namespace}/${a.metadata.name}`.localeCompare(`${b.metadata.namespace}/${b.metadata.name}`),
  );
}

export async function readCluster(opts: LiveOptions): Promise<LoadResult> {
  const client = await clientFor(opts);
  const out: LoadResult = { manifests: [], problems: [] };
  const lists = await Promise.all(
    RESOURCES.map(async (versions) => {
      const paths = typeof versions === 'string' ? [versions] : versions;
      try {
        const { index, body } = await getFirstServed<{ apiVersion: string; kind: string; items: Item[] }>(
          client,
          paths,
        );
        return { path: paths[index]!, list: body };
      } catch (e) {
        return { path: paths[0]!, error: e };
      }
    }),
  );
  for (const r of lists) {
    if ('error' in r) {
      const e = r.error;
      if (e instanceof ApiError && e.status === 404) continue; // not served: its CRD is not installed
      out.problems.push(
        e instanceof ApiError && e.status === 403
          ? `cluster: cannot list ${r.path.split('/').pop()}: forbidden for this user (the answer leaves them out)`
          : `cluster: cannot list ${r.path}: ${(e as Error).message.split('\n')[0]}`,
      );
      continue;
    }
    const kind = r.list.kind.replace(/List$/, '');
    r.list.items.forEach((o, i) => {
      const md = o.metadata;
      const metadata: Manifest['metadata'] = { name: md.name };
      if (md.namespace) metadata.namespace = md.namespace;
      if (md.labels) metadata.labels = md.labels;
      if (md.creationTimestamp) metadata.creationTimestamp = md.creationTimestamp;
      if (typeof md.generation === 'number') metadata.generation = md.generation;
      if (typeof md.deletionTimestamp === 'string') metadata.deletionTimestamp = md.deletionTimestamp;
      out.manifests.push({
        apiVersion: r.list.apiVersion,
        kind,
        metadata,
        spec: o.spec,
        status: o.status,
        ...bodyOf(kind, o as unknown as Record<string, unknown>),
        source: { file: `cluster ${r.path.split('/').pop()}`, doc: i + 1 },
      });
    });
  }
  return out;
}
