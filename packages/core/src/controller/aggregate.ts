// A kind's aggregate object (PolicyKind.aggregate): one object, owned by someone else, that every
// gateway contributes to, e.g. an operator's custom resource whose spec holds every
// gateway's limits. Each gateway's part is recomputed when the gateway is re-rendered and kept; the
// combined fields are applied by server-side apply (our field manager owns those fields only) when
// they differ from the live object's. A missing object or resource is logged once, never created:
// the operator that owns it decides its other fields.
import { isEqual } from 'lodash-es';
import { renderContext } from '../effective/render.ts';
import type { AggregateTarget, ReferenceGrant } from '../kind.ts';
import type { KubeClient } from '../kube/client.ts';
import { Informer } from '../kube/informer.ts';
import type { Logger } from '../kube/logging.ts';
import type { PolicyEngine } from '../merge/engine.ts';
import { checkSize } from './publish.ts';

export class AggregatePublisher {
  readonly informer: Informer;
  private readonly parts = new Map<string, unknown[]>();
  private readonly target: AggregateTarget;
  private readonly name: string;
  private readonly namespace: string;
  private warned = '';
  private readonly deps: {
    engine: PolicyEngine;
    client: KubeClient;
    controller: string;
    log: Logger;
    settings: Readonly<Record<string, string>>;
    writes: { inc(): void };
    skipped: { inc(): void };
  };

  constructor(target: AggregateTarget, deps: AggregatePublisher['deps'], onEvent: () => void) {
    this.target = target;
    this.deps = deps;
    this.name = deps.settings[target.nameSetting] ?? '';
    this.namespace = deps.settings[target.namespaceSetting] ?? '';
    const r = target.resource;
    this.informer = new Informer(
      deps.client,
      `/apis/${r.group}/${r.version}/namespaces/${this.namespace}/${r.plural}?fieldSelector=${encodeURIComponent(`metadata.name=${this.name}`)}`,
      () => onEvent(),
      undefined,
      true,
    );
    this.informer.onServed = () => onEvent();
  }

  /**
   * Why the object does not carry the kind's rules into force (--require-ready): its resource not
   * served or the object missing (a missing dependency), or its operator reporting it not ready or
   * nothing yet. Undefined: it does, as far as its operator says.
   */
  readiness(): { object: string; missing: boolean; why: string } | undefined {
    const r = this.target.resource;
    const object = `${r.kind} ${this.namespace}/${this.name}`;
    if (this.informer.missing)
      return {
        object,
        missing: true,
        why: `${r.plural} (${r.group}/${r.version}) is not served: install its operator`,
      };
    const live = this.informer.cache.get(`${this.namespace}/${this.name}`);
    if (!live)
      return {
        object,
        missing: true,
        why: 'it does not exist (its operator creates it; Cascade never does)',
      };
    if (!this.target.ready) return undefined;
    const ready = this.target.ready(live);
    if (ready === false) return { object, missing: false, why: 'its operator reports it not ready' };
    if (ready === undefined)
      return { object, missing: false, why: 'its operator has reported nothing on it yet' };
    return undefined;
  }

  /** Whether the setting names an object (the feature is on). */
  static enabled(target: AggregateTarget | undefined, settings: Readonly<Record<string, string>>): boolean {
    return Boolean(target && settings[target.nameSetting] && settings[target.namespaceSetting]);
  }

  /** Recomputes the parts of `gateways` (every gateway when undefined) and applies what differs. */
  async publish(gateways: string[] | undefined, grants: ReferenceGrant[]): Promise<void> {
    const { engine } = this.deps;
    const all = [...engine.topology.gateways.values()].map((g) => `${g.namespace}/${g.name}`);
    if (gateways === undefined) this.parts.clear();
    for (const gw of gateways ?? all) {
      const [ns, name] = gw.split('/') as [string, string];
      const ctx = renderContext(
        engine,
        ns,
        name,
        this.deps.controller,
        undefined,
        grants,
        this.deps.settings,
      );
      if (ctx) this.parts.set(gw, this.target.part(ctx));
      else this.parts.delete(gw);
    }
    const r = this.target.resource;
    const where = `${r.kind} ${this.namespace}/${this.name}`;
    const live = this.informer.cache.get(`${this.namespace}/${this.name}`);
    if (this.informer.missing || !live) {
      const why = this.informer.missing ? 'its resource is not served' : 'it does not exist';
      if (this.warned !== why) {
        this.warned = why;
        this.deps.log(
          'warn',
          `not publishing to ${where}: ${why} (it is never created here: its operator owns it)`,
          {},
        );
      }
      return;
    }
    this.warned = '';
    const fields = this.target.combine(
      [...this.parts.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([, p]) => p),
    );
    const differs = Object.entries(fields).some(([f, v]) => {
      const have = (live as unknown as Record<string, unknown>)[f];
      return typeof v === 'object' && v && !Array.isArray(v)
        ? Object.entries(v).some(([k, x]) => !isEqual((have as Record<string, unknown> | undefined)?.[k], x))
        : !isEqual(have, v);
    });
    if (!differs) {
      this.deps.skipped.inc();
      return;
    }
    const obj = {
      apiVersion: `${r.group}/${r.version}`,
      kind: r.kind,
      metadata: { name: this.name, namespace: this.namespace },
      ...fields,
    };
    try {
      checkSize(obj);
    } catch (e) {
      this.deps.log('warn', `not publishing to ${where}: ${(e as Error).message}`, {});
      return;
    }
    const applied = await this.deps.client.apply(
      `/apis/${r.group}/${r.version}/namespaces/${this.namespace}/${r.plural}/${this.name}`,
      {
        apiVersion: `${r.group}/${r.version}`,
        kind: r.kind,
        metadata: { name: this.name, namespace: this.namespace },
        ...fields,
      },
      this.deps.controller,
    );
    this.informer.cache.set(`${this.namespace}/${this.name}`, applied);
    this.deps.writes.inc();
  }
}
