// AuthPolicy -> Authorino AuthConfig (authorino.kuadrant.io/v1beta3), rendered from the effective
// policy of each route through a gateway (never from a single policy).
//
// - One AuthConfig per (route, gateway); usually that is one per route. When the route's rules
//   resolve differently, one per distinct result, named after the first rule of each group.
// - `spec.hosts`: the route's hostnames narrowed by the listener's, plus an id host
//   (`<name>.<namespace>.authconfig.cascade.internal`) that a gateway integration uses to pick this
//   AuthConfig (as Kuadrant's wasm-shim does with its hash host). When a route has several groups,
//   only the group of its first rule lists the route hostnames (Authorino links a host to one
//   AuthConfig).
// - Each evaluator's `when` is its own `when` followed by the top-level `when` of the policy that
//   wrote it (its context): a default merged into a route keeps its own predicates, and the winning
//   policy's predicates never gate a rule they did not write.
//
// Secret references across namespaces (never copying Secrets): Authorino resolves Secret references
// (apiKey/x509 selectors, credentialsRef, sharedSecretRef, clientSecretRef, signingKeyRefs) in the
// AuthConfig's namespace. A rule keeps the meaning its author gave it: its Secrets are looked up in
// the namespace of the policy that wrote it. So:
//   - only the route's own namespace is involved: the AuthConfig lives there;
//   - Secret-referencing rules come from exactly one other namespace X, and a ReferenceGrant in X
//     allows the route's kind in the route's namespace to reference Secrets: the AuthConfig lives in X;
//   - otherwise (no grant, or Secret references from several namespaces): the rules that cannot be
//     resolved safely are left out and a deny-all authorization rule takes their place (fail closed),
//     with the reason in the `cascade.dev/refused-references` annotation.
// Rendering a platform default's API-key selector into the route's namespace would let the route's
// owner mint keys the platform's rule accepts; that is what the rule prevents.
//
// Fail closed on invalid policies: while an AuthPolicy that names a target on a path is invalid (a
// CEL typo in a predicate, say: only Cascade can see it), the path's AuthConfig denies every request
// (an always-false authorization, 403 naming the invalid policies, the
// `cascade.dev/invalid-policies` annotation), instead of the route losing its AuthConfig and being
// served without auth. Decided over "keep the last good AuthConfig": it needs no state that a
// restart or a new replica could lose, and the policy's status says what to fix.
//
// Names: `<route>.<gateway>-<hash>` where the hash covers the route's kind, namespace and name and
// the gateway's namespace and name (and the rule when a route is split): no two targets share a
// rendered object, whatever their names (names may contain the separator); long names are cut with
// the hash kept. Label values are valid label values (hashed when the name is not one); the full
// references are in annotations. The id host is `<hash>.authconfig.cascade.internal`.
import {
  type EffectiveRule,
  hashOf,
  labelValue,
  objectName,
  pathKey,
  type RenderContext,
  type RenderedObject,
  type RenderPath,
  referenceAllowed,
  SOURCES_ANNOTATION,
} from '@cascade/core';
import { AUTH_SERVICE, type ContributedAction, PHASE } from '@cascade/wiring';

/** The always-false authorization rule a path gets while an AuthPolicy that names it is invalid. */
export const INVALID_POLICY_RULE = 'cascade-invalid-policy';

export const AUTHCONFIG_API_VERSION = 'authorino.kuadrant.io/v1beta3';

type Json = Record<string, unknown>;

/** Dotted field paths of the Secret references inside one evaluator value. */
export function secretReferences(value: unknown, base = ''): string[] {
  const out: string[] = [];
  const walk = (v: unknown, path: string, parent: string) => {
    if (Array.isArray(v)) v.forEach((x, i) => walk(x, `${path}[${i}]`, parent));
    else if (v && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        const p = path ? `${path}.${k}` : k;
        if (['credentialsRef', 'sharedSecretRef', 'clientSecretRef', 'signingKeyRefs'].includes(k))
          out.push(p);
        else if (k === 'selector' && (parent === 'apiKey' || parent === 'x509')) out.push(p);
        else walk(x, p, k);
      }
    }
  };
  walk(value, base, '');
  return out;
}

const predicates = (when: unknown): Json[] => (Array.isArray(when) ? (when as Json[]) : []);

/**
 * The evaluator with its own `when` followed by its policy's top-level `when` (unless that is the
 * AuthConfig's own top-level `when`, shared by every rule: `shared`).
 */
function withWhen(r: EffectiveRule, shared: boolean): Json {
  const v = { ...(r.value as Json) };
  const when = [...predicates(v.when), ...(shared ? [] : predicates(r.context?.when))];
  if (when.length) v.when = when;
  else delete v.when;
  return v;
}

function place(spec: Json, r: EffectiveRule, shared: boolean): void {
  const at = (path: string[]) => {
    let cur = spec;
    for (const p of path) cur = (cur[p] ??= {}) as Json;
    return cur;
  };
  switch (r.section) {
    case 'authentication':
    case 'metadata':
    case 'authorization':
    case 'callbacks':
      at([r.section])[r.name] = withWhen(r, shared);
      return;
    case 'response':
      at(['response'])[r.name] = r.value;
      return;
    case 'response.success.headers':
      at(['response', 'success', 'headers'])[r.name] = withWhen(r, shared);
      return;
    case 'response.success.filters':
      // Kuadrant's `filters` is Authorino v1beta3's `dynamicMetadata` (its CRD prunes `filters`):
      // what limits read as `auth.identity.<name>`
      at(['response', 'success', 'dynamicMetadata'])[r.name] = withWhen(r, shared);
      return;
    case 'patterns':
      // Kuadrant's {allOf: [...]} is Authorino's list of pattern expressions.
      at(['patterns'])[r.name] = (r.value as { allOf: unknown[] }).allOf;
      return;
  }
}

const routeKindGroup = 'gateway.networking.k8s.io';

interface Group {
  paths: RenderPath[];
  resultKey: string;
}

interface Planned {
  object: RenderedObject;
  paths: RenderPath[];
  /** The top-level `when` every rule of the group shares (the wasm-shim auth action's predicates). */
  predicates: string[];
}

const LEVEL_NAMES = ['GatewayClass', 'Gateway', 'Listener', 'Route', 'RouteRule'];
/** Longest `cascade.dev/rule-sources` annotation (an object's annotations share 256 KiB). */
const MAX_RULE_SOURCES = 16_384;

/** `{"<section>.<name>": "<Kind> <ns>/<name> (<level>, <as>)"}` for every rule the AuthConfig holds. */
function ruleSources(rules: readonly EffectiveRule[], refused: ReadonlySet<string>): string {
  const out: Record<string, string> = {};
  for (const r of rules)
    if (!refused.has(r.key))
      out[r.key] =
        `${r.source.kind} ${r.source.namespace}/${r.source.name} (${LEVEL_NAMES[r.level] ?? r.level}, ${r.as})`;
  const text = JSON.stringify(out);
  return text.length <= MAX_RULE_SOURCES
    ? text
    : `${text.slice(0, MAX_RULE_SOURCES - 40)}... (cut: see cascadectl explain)`;
}

/** render hook: the AuthConfigs of one gateway. */
export function renderAuthConfigs(ctx: RenderContext): RenderedObject[] {
  return planAuthConfigs(ctx).map((p) => p.object);
}

/**
 * actions hook: each path calls its AuthConfig (`scope` = the AuthConfig's id host, which is what
 * Authorino looks it up by). When every rule in force came with the same top-level `when` (one
 * policy's, usually), that is the action's predicates, as in Kuadrant: a request it does not hold for
 * is not sent to Authorino. Otherwise each evaluator keeps its own policy's `when` in the AuthConfig
 * and the action always runs. A path that fails closed (invalid policy) always calls its deny-all.
 */
export function authActions(ctx: RenderContext): Map<string, ContributedAction[]> {
  const out = new Map<string, ContributedAction[]>();
  for (const plan of planAuthConfigs(ctx)) {
    const hosts = (plan.object.spec as { hosts: string[] }).hosts;
    const scope = hosts[hosts.length - 1]!;
    const sources = [
      ...new Set(
        plan.paths.flatMap((p) => [
          ...[...p.result.rules.values()].map(
            (r) => `${r.source.kind}:${r.source.namespace}/${r.source.name}`,
          ),
          ...p.result.invalid.map((r) => `${r.kind}:${r.namespace}/${r.name}`),
        ]),
      ),
    ].sort();
    for (const p of plan.paths)
      out.set(pathKey(p.path), [
        {
          phase: PHASE.auth,
          action: {
            service: AUTH_SERVICE,
            scope,
            ...(plan.predicates.length ? { predicates: plan.predicates } : {}),
            sources,
          },
        },
      ]);
  }
  return out;
}

function sharedWhen(rules: EffectiveRule[], invalid: number): string[] {
  if (invalid > 0 || rules.length === 0) return [];
  const texts = new Set(rules.map((r) => JSON.stringify(r.context?.when ?? [])));
  if (texts.size !== 1) return [];
  return predicates(rules[0]!.context?.when)
    .map((p) => (p as { predicate?: unknown }).predicate)
    .filter((p): p is string => typeof p === 'string');
}

function planAuthConfigs(ctx: RenderContext): Planned[] {
  const byRoute = new Map<string, RenderPath[]>();
  for (const p of ctx.paths) {
    if (p.result.rules.size === 0 && p.result.invalid.length === 0) continue;
    const k = `${p.path.route.kind}/${p.path.route.namespace}/${p.path.route.name}`;
    byRoute.set(k, [...(byRoute.get(k) ?? []), p]);
  }
  const out: Planned[] = [];
  for (const paths of byRoute.values()) {
    const groups: Group[] = [];
    for (const p of paths) {
      const resultKey = JSON.stringify([
        [...p.result.rules.values()].map((r) => [r.key, r.source, r.value, r.context]),
        p.result.invalid,
      ]);
      const g = groups.find((x) => x.resultKey === resultKey);
      if (g) g.paths.push(p);
      else groups.push({ paths: [p], resultKey });
    }
    groups.forEach((g, i) => {
      const p0 = g.paths[0]!;
      out.push({
        object: authConfigFor(ctx, g, i === 0, groups.length > 1),
        paths: g.paths,
        predicates: sharedWhen([...p0.result.rules.values()], p0.result.invalid.length),
      });
    });
  }
  return out;
}

function authConfigFor(ctx: RenderContext, g: Group, first: boolean, split: boolean): RenderedObject {
  const p0 = g.paths[0]!;
  const route = p0.path.route;
  const rules = [...p0.result.rules.values()];
  // Where Secret references resolve (see the header).
  const refusals: string[] = [];
  const secretNs = new Set<string>();
  const refused = new Set<string>();
  for (const r of rules) {
    const refs = secretReferences(r.value);
    if (refs.length === 0) continue;
    const ns = r.source.namespace;
    if (ns === route.namespace) {
      secretNs.add(ns);
      continue;
    }
    const granted = referenceAllowed(
      ctx.referenceGrants,
      { group: routeKindGroup, kind: route.kind, namespace: route.namespace },
      { group: '', kind: 'Secret', namespace: ns },
    );
    if (!granted) {
      refused.add(r.key);
      refusals.push(
        `${r.key} from ${r.source.namespace}/${r.source.name} references Secrets (${refs.join(', ')}) in ${ns}, and no ReferenceGrant in ${ns} allows ${route.kind}s in ${route.namespace} to reference Secrets`,
      );
    } else secretNs.add(ns);
  }
  const foreign = [...secretNs].filter((n) => n !== route.namespace);
  let namespace = route.namespace;
  if (foreign.length === 1 && !secretNs.has(route.namespace)) namespace = foreign[0]!;
  else if (foreign.length > 0) {
    // Secret references from several namespaces cannot all resolve in one AuthConfig.
    for (const r of rules) {
      if (secretReferences(r.value).length && r.source.namespace !== route.namespace && !refused.has(r.key)) {
        refused.add(r.key);
        refusals.push(
          `${r.key} from ${r.source.namespace}/${r.source.name} references Secrets in ${r.source.namespace}, but this route also uses Secrets from ${[...secretNs].filter((n) => n !== r.source.namespace).join(', ')}: one AuthConfig resolves Secrets in one namespace`,
        );
      }
    }
  }
  const invalid = p0.result.invalid.map((r) => `${r.namespace}/${r.name}`);
  // one top-level `when` shared by every rule (one policy's, usually): it gates the wasm-shim auth
  // action (authActions), so Authorino is not called when it does not hold and the AuthConfig does
  // not repeat it, as Kuadrant writes it; otherwise each evaluator keeps its own policy's
  const shared = sharedWhen(rules, p0.result.invalid.length).length > 0;
  let spec: Json = {};
  for (const r of rules) if (!refused.has(r.key)) place(spec, r, shared);
  if (invalid.length > 0)
    // fail closed: nothing of the (incomplete) effective policy is served
    spec = {
      authorization: {
        [INVALID_POLICY_RULE]: { patternMatching: { patterns: [{ predicate: 'false' }] } },
      },
      response: {
        unauthorized: {
          code: 403,
          message: { value: `Forbidden: AuthPolicy ${invalid.join(', ')} is invalid (see its status)` },
        },
      },
    };
  if (refused.size > 0 && invalid.length === 0) {
    const authz = (spec.authorization ??= {}) as Json;
    authz['cascade-refused-reference'] = {
      patternMatching: { patterns: [{ predicate: 'false' }] },
    };
    const resp = (spec.response ??= {}) as Json;
    resp.unauthorized = {
      code: 403,
      message: {
        value: 'Forbidden: a policy references Secrets this route may not use (see the AuthConfig)',
      },
    };
  }
  const identity = JSON.stringify([
    route.kind,
    route.namespace,
    route.name,
    ctx.gateway.namespace,
    ctx.gateway.name,
    split ? p0.path.rule : '',
    namespace,
  ]);
  const readable = `${route.name}.${ctx.gateway.name}${split ? `.${p0.path.rule}` : ''}`;
  const safeName = objectName(readable, { key: identity });
  const idHost = `${hashOf(identity, 20)}.authconfig.cascade.internal`;
  const hostnames = first ? [...new Set(g.paths.flatMap((p) => p.hostnames))] : [];
  const sources = [...new Map(rules.map((r) => [`${r.source.namespace}/${r.source.name}`, r.source])).keys()];
  return {
    apiVersion: AUTHCONFIG_API_VERSION,
    kind: 'AuthConfig',
    metadata: {
      name: safeName,
      namespace,
      labels: {
        'cascade.dev/managed-by': ctx.controller,
        'cascade.dev/policy-kind': 'AuthPolicy',
        'cascade.dev/gateway': labelValue(ctx.gateway.name),
        'cascade.dev/route': labelValue(route.name),
      },
      annotations: {
        'cascade.dev/route': `${route.kind}/${route.namespace}/${route.name}`,
        'cascade.dev/gateway': `${ctx.gateway.namespace}/${ctx.gateway.name}`,
        'cascade.dev/route-rules': [...new Set(g.paths.map((p) => p.path.rule))].join(','),
        [SOURCES_ANNOTATION]: sources.join(','),
        // provenance per rule: which policy wrote it, at which level, as what (default, override...)
        'cascade.dev/rule-sources': invalid.length
          ? JSON.stringify({
              [`authorization.${INVALID_POLICY_RULE}`]: `fail closed: AuthPolicy ${invalid.join(', ')} invalid`,
            })
          : ruleSources(rules, refused),
        ...(refusals.length ? { 'cascade.dev/refused-references': refusals.join('; ') } : {}),
        ...(invalid.length ? { 'cascade.dev/invalid-policies': invalid.join(',') } : {}),
      },
    },
    spec: { hosts: [...hostnames, idHost], ...spec },
  };
}
