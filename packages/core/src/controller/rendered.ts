// The downstream objects a kind renders (each enforcement component's configuration), per gateway:
// re-rendered for the gateways a flush touched (all on a full pass) and made to match the live
// objects: apply what differs, delete what is no longer rendered. Resources the API server does not
// serve (e.g. the component's CRD is not installed) are skipped and logged once. Each object is
// written on its own (see publish.ts): a failure names the policies the gateway's objects carry.
import { isEqual } from 'lodash-es';
import { MANAGED_BY } from '../effective/effective-policy.ts';
import { renderGateway } from '../effective/render.ts';
import {
  type PolicyKind,
  REFUSED_POLICIES_ANNOTATION,
  type ReferenceGrant,
  type RenderedObject,
  SOURCES_ANNOTATION,
} from '../kind.ts';
import type { KubeClient, KubeObject } from '../kube/client.ts';
import { Informer } from '../kube/informer.ts';
import type { Logger } from '../kube/logging.ts';
import { referenceGrantFromObject } from '../topology/from-k8s.ts';
import { gatewayKey } from '../topology/types.ts';
import { checkSize, checkTextSize, type PublishFailure, type WriterDeps } from './publish.ts';
import { type PatchOp, renderedPatchTo } from './rendered-patch.ts';

/** An informer of the rendered objects of one resource that a controller manages. */
export interface RenderInformer {
  informer: Informer;
  base: string;
  plural: string;
  ready?: (live: { status?: unknown }) => boolean | undefined;
}

/**
 * apiVersion/kind -> an informer of the kind's rendered objects of that resource labelled as managed
 * by `name`; a resource confined to one namespace by a setting is listed and watched there only (a
 * Role there suffices), any other in `watchNamespaces` when given. `onEvent` gets each changed
 * object's renderedKey.
 */
export function renderInformers(
  client: KubeClient,
  kind: PolicyKind,
  name: string,
  settings: Readonly<Record<string, string>>,
  onEvent: (renderedKey: string) => void,
  watchNamespaces?: readonly string[],
): Map<string, RenderInformer> {
  const out = new Map<string, RenderInformer>();
  for (const r of kind.renders ?? []) {
    const base = r.group === '' ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`;
    const apiVersion = r.group === '' ? r.version : `${r.group}/${r.version}`;
    const confined = r.namespaceSetting ? settings[r.namespaceSetting] : undefined;
    const informer = new Informer(
      client,
      `${base}/${confined ? `namespaces/${confined}/` : ''}${r.plural}?labelSelector=${encodeURIComponent(`${MANAGED_BY}=${name}`)}`,
      (_t, o) => onEvent(`${apiVersion}/${r.kind}/${o.metadata.namespace}/${o.metadata.name}`),
      undefined,
      true,
      confined ? undefined : watchNamespaces,
    );
    out.set(`${apiVersion}/${r.kind}`, {
      informer,
      base,
      plural: r.plural,
      ...(r.ready ? { ready: r.ready } : {}),
    });
  }
  return out;
}

export interface RendererDeps extends WriterDeps {
  /** apiVersion/kind -> informer of the rendered objects of that resource. */
  renderInformers: Map<string, RenderInformer>;
  grants: Informer;
  log: Logger;
  uidOf: (path: string, ns: string, name: string) => string | undefined;
  settings: Readonly<Record<string, string>>;
  /**
   * What one gateway renders (default: the kind's render hook over `engine`). The gateway-wiring
   * controller renders from several engines at once.
   */
  render?: (
    namespace: string,
    name: string,
    uid: string | undefined,
    grants: ReferenceGrant[],
  ) => Map<string, RenderedObject>;
  /** Policies whose rules a gateway's objects carry (default: from `engine`). */
  carried?: (gw: string) => string[];
  /** Whether a live object that is no longer rendered is ours to delete (default: our policy-kind label). */
  owns?: (live: KubeObject) => boolean;
  /**
   * Objects of at least this many bytes that exist already are updated with a JSON patch of what
   * changed (rendered-patch.ts) instead of a server-side apply of the whole object: the API server's
   * work and the request shrink for large objects (a gateway's data-plane configuration). Default:
   * never. Only for resources this publisher is the one writer of: a field a patch sets is owned by
   * an Update, which a later apply that leaves it out does not remove (the next patch does).
   */
  patchFrom?: number;
  /**
   * Enforced means enforced (--require-ready): an object whose resource is not served is missing, and
   * one whose consumer reports nothing about it (no status yet) is not ready. Without it, only an
   * explicit "not ready" holds a policy back.
   */
  strictReadiness?: boolean;
}

/** Why a rendered object does not carry its policies' rules into force yet. */
export interface Waiting {
  object: string;
  /** The resource is not served (its CRD is not installed): a missing dependency, not a delay. */
  missing: boolean;
  why: string;
}

export class RenderedPublisher {
  private readonly deps: RendererDeps;
  /** Gateway ns/name -> what we rendered for it (renderedKey -> object). */
  private readonly rendered = new Map<string, Map<string, RenderedObject>>();
  /** Every rendered object by renderedKey (kept with `rendered`, not rebuilt per reconcile). */
  private readonly renderedByKey = new Map<string, RenderedObject>();
  private readonly missingWarned = new Set<string>();
  /** Policies whose rules a rendered object left out (REFUSED_POLICIES_ANNOTATION), by gateway. */
  private readonly refusals = new Map<string, { policy: string; object: string; reason: string }[]>();
  /** Rendered objects not in force yet (not served, not ready), with the policies they carry. */
  readonly waiting = new Map<string, Waiting & { policies: string[] }>();
  /**
   * Called with the policies whose Enforced condition moves: an object starts or stops waiting for
   * its consumer, or a policy's rules start or stop being left out of a rendered object.
   */
  onStatusMoved: (policies: string[]) => void = () => {};

  constructor(deps: RendererDeps) {
    this.deps = deps;
  }

  /** The ReferenceGrants in the cache, as plain data (invalid ones are ignored: they grant nothing). */
  referenceGrants(): ReferenceGrant[] {
    const out: ReferenceGrant[] = [];
    for (const o of this.deps.grants.cache.values()) {
      const g = referenceGrantFromObject({ kind: 'ReferenceGrant', metadata: o.metadata, spec: o.spec });
      if (!('error' in g)) out.push(g);
    }
    return out;
  }

  /** A rendered key `<apiVersion>/<kind>/<ns>/<name>`: its resource, namespace, name and a label. */
  private static parseKey(key: string): { res: string; ns: string; name: string; object: string } {
    const parts = key.split('/');
    const [ns, name] = parts.slice(-2) as [string, string];
    return { res: parts.slice(0, -2).join('/'), ns, name, object: `${parts.at(-3)} ${ns}/${name}` };
  }

  /** The gateway (ns/name) whose rendering holds a rendered key. */
  private gatewayOf(key: string): string | undefined {
    for (const [gw, objs] of this.rendered) if (objs.has(key)) return gw;
    return undefined;
  }

  /** Policies whose rules a gateway's rendered objects carry. */
  carriedByGateway(gw: string): string[] {
    if (this.deps.carried) return this.deps.carried(gw);
    const [ns, name] = gw.split('/') as [string, string];
    const ids = new Set<string>();
    for (const pk of this.deps.engine.topology.pathsThrough(gatewayKey(ns, name)))
      for (const r of this.deps.engine.result(pk)?.sources ?? [])
        ids.add(`${r.kind}:${r.namespace}/${r.name}`);
    return [...ids];
  }

  /** The policies a rendered object says it carries (SOURCES_ANNOTATION), sorted; undefined: it does not say. */
  private carriedByObject(key: string): string[] | undefined {
    const text = this.renderedByKey.get(key)?.metadata.annotations?.[SOURCES_ANNOTATION];
    if (text === undefined) return undefined;
    return text
      .split(',')
      .filter(Boolean)
      .map((s) => `${this.deps.kind.kind}:${s}`)
      .sort();
  }

  private gatewayCarried(key: string): string[] {
    const gw = this.gatewayOf(key);
    return gw ? this.carriedByGateway(gw) : [];
  }

  /**
   * Re-renders `gateways` (all when undefined) through the kind's render hook and makes the live
   * objects match: apply what differs, delete what is no longer rendered. Resources that are not
   * served (e.g. the component's CRD is not installed) are skipped and logged once.
   */
  async publish(
    gateways: string[] | undefined,
    extra: string[] | undefined,
  ): Promise<{ item: string; failure: PublishFailure }[]> {
    if (!this.deps.kind.render && !this.deps.render) return [];
    const check = new Set<string>(extra ?? []);
    const grants = this.referenceGrants();
    const todo = gateways ?? [
      ...new Set([
        ...[...this.deps.engine.topology.gateways.values()].map((g) => `${g.namespace}/${g.name}`),
        ...this.rendered.keys(),
      ]),
    ];
    for (const gw of todo) {
      const [ns, name] = gw.split('/') as [string, string];
      for (const [k, o] of this.rendered.get(gw) ?? []) {
        check.add(k);
        if (this.renderedByKey.get(k) === o) this.renderedByKey.delete(k);
      }
      const uid = this.deps.uidOf('/gateways', ns, name);
      const next = this.deps.render
        ? this.deps.render(ns, name, uid, grants)
        : renderGateway(this.deps.engine, ns, name, this.deps.name, uid, grants, this.deps.settings);
      const before = this.refusals.get(gw) ?? [];
      const refusals = [...next.values()].flatMap((o) => {
        const text = o.metadata.annotations?.[REFUSED_POLICIES_ANNOTATION];
        if (!text) return [];
        try {
          return (JSON.parse(text) as { policy: string; reason: string }[]).map((x) => ({
            ...x,
            object: `${o.kind} ${o.metadata.namespace}/${o.metadata.name}`,
          }));
        } catch {
          return [];
        }
      });
      if (refusals.length) this.refusals.set(gw, refusals);
      else this.refusals.delete(gw);
      if (JSON.stringify(refusals) !== JSON.stringify(before))
        this.onStatusMoved([...new Set([...before, ...refusals].map((x) => x.policy))]);
      if (next.size) this.rendered.set(gw, next);
      else this.rendered.delete(gw);
      for (const [k, o] of next) {
        check.add(k);
        this.renderedByKey.set(k, o);
      }
    }
    const desired = this.renderedByKey;
    if (gateways === undefined)
      for (const [res, { informer }] of this.deps.renderInformers)
        for (const o of informer.cache.values())
          check.add(`${res}/${o.metadata.namespace}/${o.metadata.name}`);
    const c = this.deps.client;
    const what = (key: string) => ({
      object: RenderedPublisher.parseKey(key).object,
      policies: () => this.carriedByObject(key) ?? this.gatewayCarried(key),
    });
    const failed = await this.deps.ledger.each(check, this.deps.writeConcurrency, what, async (key) => {
      const { res, ns, name } = RenderedPublisher.parseKey(key);
      const target = this.deps.renderInformers.get(res);
      if (!target) return;
      if (!target.informer.missing) this.missingWarned.delete(res); // warned again if it goes
      if (target.informer.missing) {
        if (!this.missingWarned.has(res)) {
          this.missingWarned.add(res);
          this.deps.log(
            'warn',
            'not publishing rendered objects: the resource is not served by the API server',
            {
              resource: res,
            },
          );
        }
        return;
      }
      const want = desired.get(key);
      const live = target.informer.cache.get(`${ns}/${name}`);
      const path = `${target.base}/namespaces/${ns}/${target.plural}/${name}`;
      if (want) {
        // a large object that exists is serialised once: its size, and the patch to it, whose being
        // empty (the version test alone) is renderedEqual (rendered-patch.test.ts)
        const from = this.deps.patchFrom;
        let ops: PatchOp[] | undefined;
        let sized = false;
        if (live && from !== undefined) {
          const text = JSON.stringify(want);
          sized = true;
          if (checkTextSize(text) >= from) ops = renderedPatchTo(live, JSON.parse(text) as RenderedObject);
        }
        if (ops ? ops.length === 1 : live && renderedEqual(live, want)) {
          this.deps.skipped.inc();
          return;
        }
        if (!sized) checkSize(want);
        target.informer.cache.set(`${ns}/${name}`, await this.write(path, want, ops));
        this.deps.writes.inc();
      } else if (
        live &&
        (this.deps.owns
          ? this.deps.owns(live)
          : live.metadata.labels?.['cascade.dev/policy-kind'] === this.deps.kind.kind)
      ) {
        await c.request('DELETE', path).catch((e) => {
          if ((e as { status?: number }).status !== 404) throw e;
        });
        target.informer.cache.delete(`${ns}/${name}`);
        this.deps.writes.inc();
      }
    });
    this.checkReadiness(check);
    return failed;
  }

  /**
   * A server-side apply of the object, or the JSON patch `ops` of what changed (a large object that
   * exists), tested against the live resourceVersion (a stale copy: applied whole instead).
   */
  private async write(path: string, want: RenderedObject, ops: PatchOp[] | undefined): Promise<KubeObject> {
    const c = this.deps.client;
    if (ops) {
      try {
        return await c.request<KubeObject>(
          'PATCH',
          `${path}?fieldManager=${encodeURIComponent(this.deps.name)}`,
          ops,
          'application/json-patch+json',
        );
      } catch (e) {
        const status = (e as { status?: number }).status;
        // 409/422: the live copy was stale (its version test failed); 404: gone since
        if (status !== 409 && status !== 422 && status !== 404) throw e;
      }
    }
    return c.apply(path, want, this.deps.name);
  }

  /** Readiness of the checked objects as their consumer reports it (see RenderedResource.ready). */
  private checkReadiness(keys: Iterable<string>): void {
    const moved = new Set<string>();
    // once per gateway per check: a gateway's many waiting objects (a CRD not served) share the answer
    const carried = new Map<string, string[]>();
    const carriedBy = (gw: string) => {
      let ids = carried.get(gw);
      if (!ids) carried.set(gw, (ids = this.carriedByGateway(gw).sort()));
      return ids;
    };
    for (const key of keys) {
      const { res, ns, name, object } = RenderedPublisher.parseKey(key);
      const now = this.readiness(key, res, ns, name);
      const was = this.waiting.get(key);
      if (now) {
        // the policies it carries are taken again each time: a policy that joins a gateway whose
        // object is already waiting (the same why) waits too, not Enforced past a missing CRD
        const gw = this.gatewayOf(key);
        const policies = this.carriedByObject(key) ?? (gw ? carriedBy(gw) : []);
        if (was && was.why === now.why && was.missing === now.missing && isEqual(was.policies, policies))
          continue;
        this.waiting.set(key, { object, ...now, policies });
        for (const p of new Set([...policies, ...(was?.policies ?? [])])) moved.add(p);
      } else if (!now && was) {
        this.waiting.delete(key);
        for (const p of was.policies) moved.add(p);
      }
    }
    if (moved.size) this.onStatusMoved([...moved]);
  }

  /** A policy's rules left out of rendered objects, as publish failures (object, reason). */
  refusalsFor(id: string): PublishFailure[] {
    return [...this.refusals.values()]
      .flat()
      .filter((r) => r.policy === id)
      .map((r) => ({
        object: r.object,
        message: r.reason,
        status: -1,
        policies: [id],
        attempts: 1,
        permanent: true,
      }));
  }

  /** Why a rendered object is not in force (undefined: it is, as far as its consumer says). */
  private readiness(key: string, res: string, ns: string, name: string): Omit<Waiting, 'object'> | undefined {
    const target = this.deps.renderInformers.get(res);
    if (!target || !this.renderedByKey.has(key)) return undefined;
    const strict = this.deps.strictReadiness === true;
    if (target.informer.missing)
      return strict
        ? {
            missing: true,
            why: `${target.plural} (${res.split('/').slice(0, -1).join('/')}) is not served: install its CRD`,
          }
        : undefined;
    if (!target.ready) return undefined;
    const live = target.informer.cache.get(`${ns}/${name}`);
    if (live === undefined) return strict ? { missing: false, why: 'not written yet' } : undefined;
    const ready = target.ready(live);
    if (ready === false) return { missing: false, why: 'its consumer reports it not ready' };
    if (ready === undefined && strict)
      return { missing: false, why: 'its consumer has reported nothing on it yet' };
    return undefined;
  }

  /** Rendered objects carrying a policy's rules that are not in force yet, and why. */
  waitingFor(id: string): Waiting[] {
    return [...this.waiting.values()]
      .filter((w) => w.policies.includes(id))
      .map(({ object, missing, why }) => ({ object, missing, why }));
  }
}

/** A live rendered object already carries what we would apply (fields, our labels and annotations, owners). */
export function renderedEqual(live: KubeObject, want: RenderedObject): boolean {
  for (const [f, v] of Object.entries(want)) {
    if (f === 'apiVersion' || f === 'kind' || f === 'metadata') continue;
    if (!isEqual((live as unknown as Record<string, unknown>)[f], v)) return false;
  }
  const lm = live.metadata as {
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: { uid: string }[];
  };
  for (const [k, v] of Object.entries(want.metadata.labels ?? {})) if (lm.labels?.[k] !== v) return false;
  const wa = want.metadata.annotations ?? {};
  for (const [k, v] of Object.entries(wa)) if (lm.annotations?.[k] !== v) return false;
  for (const k of Object.keys(lm.annotations ?? {}))
    if (k.startsWith('cascade.dev/') && !(k in wa)) return false;
  const wo = (want.metadata as { ownerReferences?: { uid: string }[] }).ownerReferences;
  if (
    wo &&
    !isEqual(
      (lm.ownerReferences ?? []).map((o) => o.uid),
      wo.map((o) => o.uid),
    )
  )
    return false;
  return true;
}

/**
 * The controller binary's main: kubeconfig (or in-cluster config), lease in POD_NAMESPACE, metrics on
 * METRICS_PORT, graceful stop on SIGTERM.
 */
