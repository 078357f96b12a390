// The netpolicy-controller's writes: EffectivePolicies of kind Network, conditions on the admin
// policies, Warning Events on NetworkPolicies. Each object is written only when it differs from the
// live one, and on its own (core's PublishLedger): one object the API server refuses (a namespace's
// ResourceQuota on EffectivePolicies, an admission webhook) never holds back the others; it is
// logged, counted (cascade_publish_failing_objects) and retried on its own.
import {
  type ConditionsWritten,
  checkSize,
  EFFECTIVE_GROUP,
  MANAGED_BY,
  type PublishFailure,
  type PublishLedger,
} from '@cascade/core';
import {
  type Informer,
  type KubeClient,
  type KubeObject,
  type Logger,
  type Metrics,
  postWarningEvent,
} from '@cascade/core/kube';
import { isEqual } from 'lodash-es';
import { POLICY_PATHS } from '../cluster/watch.ts';
import { type NetworkEffective, networkEffectiveSpec } from './published.ts';
import { type PolicyCondition, WARNED } from './published-conditions.ts';

const EP_PATH = `/apis/${EFFECTIVE_GROUP}/v1alpha1`;
/** Kinds with a status subresource -> their cluster-scoped paths (versions, preferred first). */
const STATUS_KINDS = new Map<string, readonly string[]>(
  POLICY_PATHS.filter(([, , cluster]) => cluster).map(([k, p]) => [k as string, p]),
);
/** `/apis/GROUP/VERSION/plural` -> GROUP/VERSION (`/api/v1/...` -> v1). */
export const apiVersionOf = (path: string): string => {
  const [, root, group, version] = path.split('?')[0]!.split('/');
  return root === 'api' ? group! : `${group}/${version}`;
};
/** The apiVersion an object of KIND is read in now: its informer's version (the preferred before a list). */
const apiVersionNow = (kind: string, informers: Map<string, Informer>): string =>
  apiVersionOf(
    informers.get(kind)?.path ?? POLICY_PATHS.find(([k]) => k === kind)?.[1][0] ?? '/apis/unknown/v1/x',
  );

/** The network policies whose conditions the netpolicy-controller (field manager `manager`) writes: for `cascadectl cleanup`. */
export const conditionsWritten = (manager: string): ConditionsWritten[] =>
  [...STATUS_KINDS].flatMap(([what, paths]) =>
    paths.map((path) => ({ what, path, apiVersion: apiVersionOf(path), manager })),
  );

export interface NetworkPublisherDeps {
  client: KubeClient;
  /** Field manager, owner label value and Event source. */
  name: string;
  /** The EffectivePolicies labelled as ours. */
  effective: Informer;
  /** Kind -> the informer of that policy kind. */
  policyInformers: Map<string, Informer>;
  ledger: PublishLedger;
  writes: ReturnType<Metrics['counter']>;
  skipped: ReturnType<Metrics['counter']>;
  log: Logger;
  /** API writes in flight at once. Default 8. */
  writeConcurrency?: number;
}

export type Failed = { item: string; failure: PublishFailure }[];

export class NetworkPublisher {
  private readonly deps: NetworkPublisherDeps;
  /** NetworkPolicy problems already reported as Events (policy key -> message), seeded at start. */
  private readonly reported = new Map<string, string>();

  constructor(deps: NetworkPublisherDeps) {
    this.deps = deps;
  }

  private get n(): number {
    return this.deps.writeConcurrency ?? 8;
  }

  /** The Events this controller posted before (a restart does not post them again). */
  async seedReported(): Promise<void> {
    try {
      const r = await this.deps.client.request<{ items: KubeObject[] }>(
        'GET',
        `/api/v1/events?fieldSelector=${encodeURIComponent(`source=${this.deps.name}`)}`,
      );
      for (const e of r.items) {
        const { involvedObject: o, message } = e as unknown as {
          involvedObject: { kind?: string; namespace?: string; name: string };
          message: string;
        };
        const kind = o.kind ?? 'NetworkPolicy';
        this.reported.set(o.namespace ? `${kind}/${o.namespace}/${o.name}` : `${kind}/${o.name}`, message);
      }
    } catch (e) {
      this.deps.log('warn', 'cannot list earlier Events: problems may be reported again', {
        error: String(e),
      });
    }
  }

  /**
   * Makes the live EffectivePolicies match `desired`: those of `keys` only, or all (undefined), and
   * ours that are no longer desired go. Returns the keys whose write failed.
   */
  effectives(desired: ReadonlyMap<string, NetworkEffective>, keys?: readonly string[]): Promise<Failed> {
    const { effective, ledger } = this.deps;
    const items = keys ?? [...new Set([...desired.keys(), ...effective.cache.keys()])];
    const what = (key: string) => ({ object: `EffectivePolicy ${key}`, policies: () => [] });
    return ledger.each(items, this.n, what, (key) => this.effective(key, desired.get(key)));
  }

  private async effective(key: string, e: NetworkEffective | undefined): Promise<void> {
    const { client, effective, name } = this.deps;
    const live = effective.cache.get(key);
    if (!e) {
      if (!live) return;
      this.deps.writes.inc();
      await client
        .request(
          'DELETE',
          `${EP_PATH}/namespaces/${encodeURIComponent(live.metadata.namespace ?? '')}/effectivepolicies/${live.metadata.name}`,
        )
        .catch((err: { status?: number }) => {
          if (err.status !== 404) throw err;
        });
      effective.cache.delete(key);
      return;
    }
    const spec = networkEffectiveSpec(e);
    const labels = { [MANAGED_BY]: name, 'cascade.dev/policy-kind': 'network' };
    if (live && isEqual(live.spec, spec) && isEqual(live.metadata.labels ?? {}, labels)) {
      this.deps.skipped.inc();
      return;
    }
    const obj = {
      apiVersion: `${EFFECTIVE_GROUP}/v1alpha1`,
      kind: 'EffectivePolicy',
      metadata: { name: e.name, namespace: e.namespace, labels },
      spec,
    };
    checkSize(obj);
    this.deps.writes.inc();
    const applied = await client.apply(
      `${EP_PATH}/namespaces/${encodeURIComponent(e.namespace)}/effectivepolicies/${e.name}`,
      obj,
      name,
    );
    effective.cache.set(key, applied);
  }

  /** Conditions (and NetworkPolicy Events) where they differ from the live ones. Returns failures. */
  conditions(conditions: ReadonlyMap<string, PolicyCondition[]>): Promise<Failed> {
    const what = (key: string) => ({ object: `${key} status`, policies: () => [] });
    return this.deps.ledger.each(conditions.keys(), this.n, what, async (key) => {
      if (!key.startsWith('NetworkPolicy/')) await this.status(key, conditions.get(key)!);
      await this.event(key, conditions.get(key)!);
    });
  }

  /**
   * NetworkPolicy has no status in the API: a Warning Event when it is invalid, selects no pod, or has
   * a dead rule or a named port that matches nothing.
   */
  private async event(key: string, conds: PolicyCondition[]): Promise<void> {
    const parts = key.split('/');
    const kind = parts[0]!;
    const namespaced = parts.length === 3;
    // a NetworkPolicy has no status: its problems are Events; a cluster-scoped policy's status says
    // them, and an Event says what is wrong with what is accepted (warnings) or refused (Accepted)
    const bad = conds.filter((c) =>
      namespaced
        ? (c.type === 'Accepted' || c.type === 'RulesEffective' || c.type === 'Selecting') &&
          c.status === 'False'
        : c.type === 'Accepted' && (c.status === 'False' || c.message.startsWith(WARNED)),
    );
    // an accepted policy's warnings: their own reason (its condition's is Accepted)
    const reason = (c: PolicyCondition) => (c.status === 'True' ? 'AcceptedWithWarnings' : c.reason);
    const message = bad.map((c) => `${reason(c)}: ${c.message}`).join('; ');
    if (!message || this.reported.get(key) === message) return;
    const name = parts.at(-1)!;
    this.deps.writes.inc();
    await postWarningEvent(
      this.deps.client,
      {
        apiVersion: apiVersionNow(kind, this.deps.policyInformers),
        kind,
        namespace: namespaced ? parts[1]! : '', // cluster-scoped: its Events live in default
        name,
      },
      reason(bad[0]!),
      message,
      { component: this.deps.name },
    );
    this.reported.set(key, message); // only once it is posted: a failed Event is tried again
  }

  private async status(key: string, conds: PolicyCondition[]): Promise<void> {
    const [kind, name] = key.split('/') as [string, string];
    const inf = this.deps.policyInformers.get(kind);
    const live = inf?.cache.get(name);
    if (!inf || !live || !STATUS_KINDS.has(kind)) return;
    const path = inf.path; // the version it was read in
    const old =
      (live.status as { conditions?: (PolicyCondition & { lastTransitionTime?: string })[] })?.conditions ??
      [];
    const now = new Date().toISOString();
    const next = conds.map((c) => {
      const prev = old.find((o) => o.type === c.type);
      return {
        ...c,
        lastTransitionTime:
          prev && prev.status === c.status && prev.lastTransitionTime ? prev.lastTransitionTime : now,
        observedGeneration: live.metadata.generation ?? 0,
      };
    });
    const same =
      old.length === next.length &&
      next.every((c) => {
        const o = old.find((x) => x.type === c.type) as (typeof next)[number] | undefined;
        return (
          o &&
          o.status === c.status &&
          o.reason === c.reason &&
          o.message === c.message &&
          (o as { observedGeneration?: number }).observedGeneration === c.observedGeneration
        );
      });
    if (same) {
      this.deps.skipped.inc();
      return;
    }
    this.deps.writes.inc();
    const applied = await this.deps.client.apply(
      `${path}/${encodeURIComponent(name)}/status`,
      { apiVersion: apiVersionOf(path), kind, metadata: { name }, status: { conditions: next } },
      this.deps.name,
    );
    inf.cache.set(name, applied);
  }
}
