// A configuration that fits (wasm.ts header, budget.ts): routes refused fairly between namespaces
// when it would not, each replaced by deny sets, and a configuration that denies everything when
// nothing fits.
import type { RouteMatch } from '@cascade/core';
import { compareCandidates, matchPredicates, type Precedence } from '../routes/matches.ts';
import { planRefusals, type SizedRoute } from './budget.ts';
import { type Built, denyAction, hash, services, setBytes } from './built.ts';
import {
  AUTH_SERVICE,
  DEFAULT_WIRING,
  DENY_SCOPE,
  type WasmConfig,
  type WiringProblem,
  type WiringResult,
  type WiringSettings,
} from './config.ts';
import { publishedConfig, typedSet } from './typed.ts';

/** Longest disjunction of path predicates one deny set carries (bytes). */
const MAX_DENY_PREDICATE = 1024;
/** What one deny set may take at most, besides its hostname (name, action, predicate, JSON). */
export const DENY_SET_BYTES = MAX_DENY_PREDICATE + 400;
/** What a deny set's auth action adds in the typed form (its message builder and replies). */
let denyExtra: number | undefined;
function typedDenyExtra(): number {
  const set = {
    name: '',
    routeRuleConditions: { hostnames: [] },
    actions: [{ service: AUTH_SERVICE, scope: DENY_SCOPE }],
  };
  denyExtra ??= JSON.stringify(typedSet(set)).length - JSON.stringify(set).length;
  return denyExtra;
}
/** Rounds of refusing more when the real size is still over the limit. */
const MAX_ROUNDS = 6;

/** The path a match can take, as a literal element prefix (`/` when nothing shorter is known). */
function literalPrefix(m: RouteMatch | undefined, kind: Built['candidate']['routeKind']): string {
  if (kind === 'GRPCRoute')
    return m?.grpc?.type !== 'RegularExpression' && m?.grpc?.service ? `/${m.grpc.service}` : '/';
  const p = m?.path ?? { type: 'PathPrefix' as const, value: '/' };
  if (p.type !== 'RegularExpression') return p.value;
  const literal = /^[^.[\]()*+?{}|^$\\]*/.exec(p.value.replace(/^\^/, ''))![0];
  return literal.slice(0, literal.lastIndexOf('/') + 1) || '/';
}

/** The longest element-wise prefix of paths (`/a/b` and `/a/c` -> `/a`). */
function commonPrefix(paths: readonly string[]): string {
  const split = paths.map((p) => p.split('/').filter(Boolean));
  const out: string[] = [];
  for (let i = 0; split.every((s) => i < s.length && s[i] === split[0]![i]); i++) out.push(split[0]![i]!);
  return `/${out.join('/')}`;
}

/**
 * The refused routes' sets, replaced under each (namespace, hostname) by one deny set (its action
 * names the routes, the problems say why), placed where the first of them was in the order. Its
 * predicate is the disjunction of their matches' paths (or gRPC methods) when that fits in
 * MAX_DENY_PREDICATE, else their common path prefix: it denies every request they took and, over-
 * approximating, a lower-ranked route's request under those paths. With no common prefix either, it
 * has no predicate and goes after every other set of the hostname, as a regex refusal does (a request
 * another route's set takes then meets that set). Sets already refused for their regex stay.
 */
function denied(built: readonly Built[], refused: ReadonlySet<string>, precedence: Precedence): Built[] {
  const groups = new Map<string, Built[]>();
  const out: Built[] = [];
  for (const b of built) {
    if (!refused.has(b.route)) continue;
    if (b.refused) out.push(b);
    else {
      const key = JSON.stringify([b.candidate.routeNamespace, b.candidate.hostname]);
      groups.set(key, [...(groups.get(key) ?? []), b]);
    }
  }
  for (const [key, group] of groups) {
    const [ns, hostname] = JSON.parse(key) as [string, string];
    const first = [...group].sort((x, y) => compareCandidates(x.candidate, y.candidate, precedence))[0]!;
    const paths = new Set<string>();
    const prefixes: string[] = [];
    for (const b of group) {
      const { match, routeKind } = b.candidate;
      const only: RouteMatch | undefined =
        routeKind === 'GRPCRoute'
          ? match?.grpc
            ? { grpc: match.grpc }
            : undefined
          : { path: match?.path ?? { type: 'PathPrefix', value: '/' } };
      paths.add(matchPredicates(routeKind, only).join(' && '));
      prefixes.push(literalPrefix(match, routeKind));
    }
    const list = [...paths];
    const everything = list.some((p) => p === '' || p === "request.url_path.startsWith('/')");
    const disjunction = list.length === 1 ? list[0]! : list.map((p) => `(${p})`).join(' || ');
    const prefix = commonPrefix(prefixes);
    const predicate = everything
      ? undefined
      : disjunction.length <= MAX_DENY_PREDICATE
        ? disjunction
        : prefix !== '/'
          ? matchPredicates('HTTPRoute', { path: { type: 'PathPrefix', value: prefix } })[0]
          : undefined;
    const routes = [...new Set(group.map((b) => b.route))].sort();
    out.push({
      ...first,
      route: routes.length === 1 ? routes[0]! : `${first.candidate.routeKind}/${ns}/*`,
      ports: new Set(group.flatMap((b) => [...b.ports])),
      sizeRefused: true,
      // no predicate but the whole hostname: only what no other set takes
      refused: predicate === undefined && !everything,
      set: {
        name: `cascade:refused@${ns}@${hostname}|${hash(key)}`,
        routeRuleConditions: { hostnames: [hostname], ...(predicate ? { predicates: [predicate] } : {}) },
        actions: [
          {
            service: AUTH_SERVICE,
            scope: DENY_SCOPE,
            sources: [
              `refused for size: ${routes.slice(0, 3).join(', ')}${routes.length > 3 ? ` and ${routes.length - 3} more` : ''}`,
            ],
          },
        ],
      },
    });
  }
  return out;
}

/**
 * The configuration within `maxConfigBytes` and `maxSetsPerNamespace` (budget.ts): the fair plan
 * first, then, while the real size is still over (deny sets, repeated sets of other ports), the
 * largest remaining routes refused in rounds (at most MAX_ROUNDS builds), and if it still does not
 * fit, a configuration that denies every request (`failedClosed`).
 */
export function fitSize(
  built: Built[],
  layout: (sets: Built[]) => Built[],
  assemble: (sets: Built[]) => Pick<WiringResult, 'config' | 'bytes' | 'origins'>,
  settings: WiringSettings,
  precedence: Precedence,
  problems: WiringProblem[],
): WiringResult {
  const setCap = settings.maxSetsPerNamespace ?? DEFAULT_WIRING.maxSetsPerNamespace ?? Infinity;
  let laid = layout(built);
  let result = assemble(laid);
  /** Each route's sets as laid out: guards and sets already denied are no route's to lose. */
  const routes = (sets: readonly Built[]) => {
    const by = new Map<string, SizedRoute>();
    for (const b of sets) {
      if (b.route === '*' || b.sizeRefused || b.refused) continue;
      const r = by.get(b.route) ?? {
        route: b.route,
        namespace: b.candidate.routeNamespace,
        bytes: 0,
        sets: 0,
        hostnames: [],
      };
      r.bytes += setBytes(b.set, settings.configForm);
      r.sets++;
      if (!r.hostnames.includes(b.candidate.hostname)) r.hostnames.push(b.candidate.hostname);
      by.set(b.route, r);
    }
    return by;
  };
  const sized = routes(laid);
  const perNs = new Map<string, number>();
  for (const r of sized.values()) perNs.set(r.namespace, (perNs.get(r.namespace) ?? 0) + r.sets);
  if (result.bytes <= settings.maxConfigBytes && [...perNs.values()].every((n) => n <= setCap))
    return { ...result, problems };
  const refused = new Set<string>();
  const refuse = (route: string, reason: string) => {
    refused.add(route);
    problems.push({ route, reason: `${reason}: its requests are denied`, size: true });
  };
  const compose = () => [
    ...built.filter((b) => !refused.has(b.route)),
    ...denied(built, refused, precedence),
  ];
  // the fair plan, from the sizes as laid out (ports and guards included)
  const fixed = result.bytes - [...sized.values()].reduce((n, r) => n + r.bytes, 0);
  const plan = planRefusals([...sized.values()], {
    bytes: settings.maxConfigBytes - fixed,
    setsPerNamespace: setCap,
    denyBytes: (hostname) =>
      DENY_SET_BYTES + (settings.configForm === 'typed' ? typedDenyExtra() : 0) + hostname.length,
  });
  for (const [route, why] of plan) refuse(route, why);
  laid = layout(compose());
  result = assemble(laid);
  for (let round = 1; round < MAX_ROUNDS && result.bytes > settings.maxConfigBytes; round++) {
    // what the plan could not foresee: the largest routes left, enough to cover the excess twice
    let excess = 2 * (result.bytes - settings.maxConfigBytes);
    const left = [...routes(laid).values()].sort((a, c) => c.bytes - a.bytes || (a.route < c.route ? -1 : 1));
    if (left.length === 0) break;
    for (const r of left) {
      if (excess <= 0) break;
      refuse(
        r.route,
        `its action sets take ${r.bytes.toLocaleString('en')} bytes and the gateway's configuration ${result.bytes.toLocaleString('en')}, over the ${settings.maxConfigBytes.toLocaleString('en')} an object may hold`,
      );
      excess -= r.bytes;
    }
    laid = layout(compose());
    result = assemble(laid);
  }
  if (result.bytes <= settings.maxConfigBytes) return { ...result, problems };
  // nothing fits: every request is denied, and the policies on this gateway say so
  const failedClosed = `the gateway's configuration takes ${result.bytes.toLocaleString('en')} bytes with ${refused.size.toLocaleString('en')} routes refused, over the ${settings.maxConfigBytes.toLocaleString('en')} an object may hold: every request is denied`;
  const config: WasmConfig = {
    services: services(settings),
    actionSets: [
      {
        name: 'cascade:failed-closed',
        routeRuleConditions: { hostnames: ['*'] },
        actions: [denyAction(failedClosed)],
      },
    ],
  };
  const bytes = Buffer.byteLength(JSON.stringify(publishedConfig(config, settings)));
  return { config, origins: {}, bytes, problems, failedClosed };
}
