// The watch set: what both programs read from the cluster to feed the engine. Namespaces, Nodes (with
// the tunnel addresses their agents' NetpolNodeReports add), Pods
// (through the address owners), the policy kinds, and for the agent Services with their
// EndpointSlices; each event updates the engine or the service catalog and asks for one coalesced
// sync. Pods come either from every Pod of the cluster, or (podSource) from this node's Pods
// (fieldSelector spec.nodeName) and the PodAddressSlices the netpolicy-controller publishes for the
// others; a pod the Pod API shows wins over what a slice says of it.

import { EFFECTIVE_GROUP } from '@cascade/core';
import {
  Informer,
  type InformerEvent,
  type KubeClient,
  type KubeObject,
  type Logger,
} from '@cascade/core/kube';
import { isolationOnly, type Refusal } from '../engine/budget.ts';
import type { NetpolEngine } from '../engine/engine.ts';
import {
  type NetPolicyObject,
  namespaceFromObject,
  nodeFromObject,
  type Pod,
  podFromObject,
} from '../engine/model.ts';
import type { ServiceCatalog } from '../engine/services.ts';
import { STAGED_KINDS, STAGED_VERSION, type StagedKindName, stagedFromObject } from '../engine/staged.ts';
import { stagedObjectKey } from '../engine/staged-view.ts';
import { NodeAddresses } from './node-addresses.ts';
import { NODE_REPORT_PATH, nodeReportFromObject } from './node-report.ts';
import type { AddressOwners } from './owners.ts';
import { addressSliceFromObject, SLICE_PATH, type SliceIndex } from './slices.ts';

/**
 * Each policy kind: its list paths (the versions read, preferred first: ClusterNetworkPolicy v1beta1
 * where network-policy-api v0.3 is installed, v1alpha2 where v0.2 is; the informer takes the first one
 * served at each list, one object whichever version shows it) and whether it is optional (a CRD).
 */
/** Where the Staged* kinds are served (cluster/staged-crds.ts). */
export const STAGED_BASE = `/apis/${EFFECTIVE_GROUP}/${STAGED_VERSION}`;

export const POLICY_PATHS: [NetPolicyObject['kind'], readonly string[], boolean][] = [
  ['NetworkPolicy', ['/apis/networking.k8s.io/v1/networkpolicies'], false],
  ['AdminNetworkPolicy', ['/apis/policy.networking.k8s.io/v1alpha1/adminnetworkpolicies'], true],
  [
    'BaselineAdminNetworkPolicy',
    ['/apis/policy.networking.k8s.io/v1alpha1/baselineadminnetworkpolicies'],
    true,
  ],
  [
    'ClusterNetworkPolicy',
    [
      '/apis/policy.networking.k8s.io/v1beta1/clusternetworkpolicies',
      '/apis/policy.networking.k8s.io/v1alpha2/clusternetworkpolicies',
    ],
    true,
  ],
];

export interface WatchContext {
  client: KubeClient;
  engine: NetpolEngine;
  /** Absent: Services and EndpointSlices are not watched (the netpolicy-controller). */
  services?: ServiceCatalog;
  owners: AddressOwners;
  refusedPolicies: Map<string, Refusal>;
  log: Logger;
  /** something changed: sync soon (coalesced) */
  changed: () => void;
  /** pod address ownership changed: report conflicts */
  ownersChanged: () => void;
  /** this pod's claim changed (the controller's slices follow it) */
  podChanged?: (key: string) => void;
  /** Watch the Staged* kinds into the engine's staged view (the agent: its datapath judges by both). */
  staged?: boolean;
  /** a NetpolNodeReport changed (the controller relays its findings) */
  reportChanged?: () => void;
  /**
   * Absent: every Pod is watched. Present: every pod, this node's included, comes from the
   * controller's PodAddressSlices (RBAC cannot limit a DaemonSet's reads to its node, so the agent
   * reads no Pod cluster-wide), except those of `namespace` (Cascade's own, a Role's grant), read
   * directly so that the controllers never wait for the slices they publish. Until the marker says a
   * complete set is out the agent does not touch the datapath (agent.ts).
   */
  podSource?: { slices: SliceIndex; namespace?: string };
}

export function clusterInformers(ctx: WatchContext): Informer[] {
  const informers: Informer[] = [];
  const c = ctx.client;
  const raw = (o: KubeObject) => ({ metadata: o.metadata, spec: o.spec, status: o.status });
  const on = (f: (t: InformerEvent, o: KubeObject) => void) => (t: InformerEvent, o: KubeObject) => {
    f(t, o);
    ctx.changed();
  };
  const addresses = new NodeAddresses(ctx.engine);
  const source = ctx.podSource;
  /** Pods as the Pod API shows them (every one, or with a podSource its namespace's): they win over slices. */
  const local = new Map<string, Pod>();
  // A pod without an address (yet, or any more: finished, hostNetwork) has no identity to enforce;
  // an address two live pods claim belongs to the newest.
  const claim = (key: string) => {
    const pod = local.get(key) ?? source?.slices.get(key);
    for (const [k, owned] of ctx.owners.claim(key, pod)) {
      if (owned) ctx.engine.upsertPod(owned);
      else {
        const slash = k.indexOf('/');
        ctx.engine.removePod(k.slice(0, slash), k.slice(slash + 1));
      }
    }
    ctx.podChanged?.(key);
    ctx.ownersChanged();
  };
  informers.push(
    new Informer(
      c,
      '/api/v1/namespaces',
      on((t, o) => {
        if (t === 'DELETED') return; // its pods are deleted with it
        const ns = namespaceFromObject(raw(o));
        if ('error' in ns) ctx.log('warn', 'ignoring namespace', { name: o.metadata.name, error: ns.error });
        else ctx.engine.upsertNamespace(ns);
      }),
    ),
    new Informer(
      c,
      '/api/v1/nodes',
      on((t, o) => {
        // a deleted node's addresses leave the ipcache: they may be reused by anyone
        if (t === 'DELETED') return addresses.node(o.metadata.name);
        const n = nodeFromObject(raw(o));
        if ('error' in n) ctx.log('warn', 'ignoring node', { name: o.metadata.name, error: n.error });
        else addresses.node(o.metadata.name, n);
      }),
    ),
    // the agents' reports (optional: the CRD may not be served yet): each node's tunnel addresses; a
    // sync only when those change (a report's findings change on their own, on every node's agent)
    new Informer(
      c,
      NODE_REPORT_PATH,
      (t, o) => {
        const r = t === 'DELETED' ? undefined : nodeReportFromObject(o);
        if (r && 'error' in r)
          ctx.log('warn', "ignoring a NetpolNodeReport's addresses (the last good ones stay)", {
            node: o.metadata.name,
            error: r.error,
          });
        else if (addresses.report(o.metadata.name, r?.tunnelAddresses)) ctx.changed();
        ctx.reportChanged?.();
      },
      undefined,
      true,
    ),
  );
  if (!source || source.namespace)
    informers.push(
      new Informer(
        c,
        source ? `/api/v1/namespaces/${encodeURIComponent(source.namespace!)}/pods` : '/api/v1/pods',
        on((t, o) => {
          const ns = o.metadata.namespace ?? 'default';
          const key = `${ns}/${o.metadata.name}`;
          const p = t === 'DELETED' ? undefined : podFromObject(raw(o));
          if (p && 'error' in p) {
            ctx.log('warn', 'ignoring pod', { pod: key, error: p.error });
            return;
          }
          if (p) local.set(key, p);
          else local.delete(key);
          claim(key);
        }),
      ),
    );
  if (source)
    informers.push(
      new Informer(
        c,
        SLICE_PATH,
        on((t, o) => {
          const spec = t === 'DELETED' ? undefined : addressSliceFromObject(o);
          if (spec && 'error' in spec) {
            ctx.log('warn', 'ignoring PodAddressSlice (its last good version stays)', {
              slice: o.metadata.name,
              error: spec.error,
            });
            return;
          }
          for (const key of source.slices.apply(o.metadata.name, spec)) claim(key);
        }),
      ),
    );
  if (ctx.staged)
    for (const kind of Object.keys(STAGED_KINDS) as StagedKindName[])
      informers.push(
        new Informer(
          c,
          `${STAGED_BASE}/${STAGED_KINDS[kind].plural}`,
          on((t, o) => {
            const s = stagedFromObject(kind, o as never);
            const key = stagedObjectKey(kind, o.metadata);
            // a staged object that cannot be read stages nothing (its status says why)
            if (t === 'DELETED' || 'error' in s) ctx.engine.removeStaged(key);
            else ctx.engine.upsertStaged(s);
          }),
          undefined,
          true,
        ),
      );
  for (const [kind, paths, optional] of POLICY_PATHS) {
    informers.push(
      new Informer(
        c,
        paths,
        on((t, o) => {
          const obj: NetPolicyObject = { kind, name: o.metadata.name, spec: o.spec };
          if (kind === 'NetworkPolicy') obj.namespace = o.metadata.namespace ?? 'default';
          const key = obj.namespace ? `${kind}/${obj.namespace}/${obj.name}` : `${kind}/${obj.name}`;
          const refused = ctx.refusedPolicies.get(key);
          if (t === 'DELETED') {
            ctx.refusedPolicies.delete(key);
            ctx.engine.removePolicy(key);
          } else if (refused && JSON.stringify(refused.original.spec) === JSON.stringify(obj.spec))
            ctx.engine.upsertPolicy(isolationOnly(obj)); // unchanged (a relist): still refused
          else {
            ctx.refusedPolicies.delete(key);
            ctx.engine.upsertPolicy(obj);
          }
          // a change in a namespace may make room for its refused policies: judged again at sync
          if (kind === 'NetworkPolicy')
            for (const [k, r] of [...ctx.refusedPolicies])
              if (r.namespace === obj.namespace && k !== key) {
                ctx.refusedPolicies.delete(k);
                ctx.engine.upsertPolicy(r.original);
              }
        }),
        undefined,
        optional,
      ),
    );
  }
  const services = ctx.services;
  if (!services) return informers;
  for (const [kind, path] of [
    ['Service', '/api/v1/services'],
    ['EndpointSlice', '/apis/discovery.k8s.io/v1/endpointslices'],
  ] as const)
    informers.push(
      new Informer(
        c,
        path,
        on((t, o) => {
          const error = services.apply(kind, o as Parameters<ServiceCatalog['apply']>[1], t === 'DELETED');
          if (error) ctx.log('warn', 'ignoring object: its Service frontends are not translated', { error });
        }),
      ),
    );
  return informers;
}
