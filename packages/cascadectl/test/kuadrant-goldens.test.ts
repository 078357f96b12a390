// Compatibility with kuadrant-operator's own output (../shared/kuadrant-goldens): for requests
// generated over each input's hostnames, paths, methods, headers and query parameters, Cascade's
// wasm-shim configuration must call AuthConfigs of the same content and count the same limits
// (max_value, seconds, counter values, counter namespace) in the same order as Kuadrant's, both the
// v1.4.6 form (services + actionSets) against Cascade's legacy form, and main's typed form (grpc
// actions with CEL message builders) against Cascade's typed form (wiring's toTypedConfig, what
// `--config-form typed` publishes), both evaluated by wiring's typed evaluator (typed-request.ts).
// Deliberate differences (see the wiring README) are avoided by the generator: a path that only
// Kuadrant's looser PathPrefix takes (`/v1x` for `/v1`) is not generated, nor a value for a query
// parameter's RegularExpression (Kuadrant compares it as a string). Kuadrant cannot tell a gateway's
// listeners apart and applies a listener's policies on every port; Cascade sends each request on
// every port the gateway listens on and Kuadrant's outcome must be Cascade's on one of them (on a
// gateway with one port: on that port).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type CountedLimitSpec,
  countedLimits,
  DEFAULT_WIRING,
  type HttpRequest,
  type RequestTrace,
  type TypedWasmConfig,
  toTypedConfig,
  traceRequest,
  traceTypedRequest,
  type WasmConfig,
} from '@cascade/wiring';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { renderedObjects } from '../src/commands/render.ts';
import { gatewayWirings } from '../src/commands/wiring.ts';
import { loadManifests } from '../src/load.ts';
import { buildGatewayWorld } from '../src/world.ts';

/** `../shared` beside the repository (CI has it too); CASCADE_SHARED points elsewhere. */
const GOLDENS = join(
  process.env.CASCADE_SHARED ?? new URL('../../../../shared/', import.meta.url).pathname,
  'kuadrant-goldens',
);

interface Golden {
  authConfigs: { name: string; spec: Record<string, unknown> }[];
  limitadorLimits: CountedLimitSpec[];
  gateways: Record<
    string,
    { wasmConfig: { actionSets: Record<string, unknown>[]; services: Record<string, unknown> } }
  >;
}

/** What a request gets: the AuthConfig content called and the limits counted, in order. */
type Outcome = (
  | { auth: unknown }
  | {
      limits: { namespace: string; max_value: number; seconds: number; counter: string[]; name?: string }[];
    }
  | { typedBuilderError: string }
)[];

/**
 * Where Cascade departs from Kuadrant on purpose (listed in the wiring README), by scenario: the
 * Limitador limits (by name) that the two count differently for the hosts named, left out of both
 * outcomes there; every other part of the outcome must still be equal.
 */
const DELIBERATE: Record<string, { hosts: RegExp; extraLimits: string[]; why: string }[]> = {
  '09-large-3gw-10routes': [
    {
      hosts: /^invoices\./,
      extraLimits: ['partner-cap', 'gw-global', 'per-ip'],
      why: "Kuadrant gates the gateways' override partner-cap and defaults gw-global and per-ip with the route policy invoices-rl's top-level `when`; Cascade never lets a policy's `when` gate rules it did not write (a tenant could switch an admin's override off)",
    },
  ],
};

/** An outcome without the limits named (a deliberate difference), and without limit names. */
function withoutLimits(o: Outcome | 'no-match', names: string[]): Outcome | 'no-match' {
  if (o === 'no-match') return o;
  const out: Outcome = [];
  for (const x of o) {
    // the action that carries the limits left out may fail to build in one form only (Cascade's
    // ungated gateway limits read a counter the route's `when` would have kept Kuadrant from reading)
    if (names.length > 0 && 'typedBuilderError' in x) continue;
    if (!('limits' in x)) {
      out.push(x);
      continue;
    }
    // Cascade's names say where a limit comes from (`<name> from <policy> ...`), Kuadrant's are bare
    const kept = x.limits
      .filter((l) => !names.includes((l.name ?? '').split(' from ')[0]!))
      .map(({ name: _, ...l }) => l);
    if (kept.length > 0) out.push({ limits: kept });
  }
  return out;
}

/** Drops what defaulting adds and does not change meaning: empty objects, nulls, `hosts`. */
function normalize(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(normalize);
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      if (k === 'hosts' || x === null) continue;
      const n = normalize(x);
      if (n && typeof n === 'object' && !Array.isArray(n) && Object.keys(n).length === 0) continue;
      out[k] = n;
    }
    return out;
  }
  return v;
}

/**
 * What a request gets from a trace (either form): the AuthConfig called, the limits counted, and
 * where a typed message builder fails (the call is not made: both forms must fail alike).
 */
function outcome(
  t: RequestTrace,
  authBy: (scope: string) => unknown,
  limits: CountedLimitSpec[],
): Outcome | 'no-match' {
  if (!t.matched) return 'no-match';
  const out: Outcome = [];
  for (const a of t.actions) {
    if (a.builderError) {
      out.push({ typedBuilderError: a.type });
      continue;
    }
    if (!a.run) continue;
    if (a.type === 'auth') out.push({ auth: authBy(a.scope) });
    else if (a.type === 'ratelimit' && a.descriptor) {
      const counted = countedLimits(limits, a.scope, a.descriptor).map((c) => ({
        namespace: c.limit.namespace,
        max_value: c.limit.max_value,
        seconds: c.limit.seconds,
        counter: c.counter,
        ...(c.limit.name ? { name: c.limit.name } : {}),
      }));
      // a descriptor that counts no limit is no limit (Kuadrant may not send it at all)
      if (counted.length > 0)
        out.push({ limits: counted.sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y))) });
    }
  }
  return out;
}

/** A string a simple regular expression of a route matches (enough for the goldens' patterns). */
function sampleFor(pattern: string): string {
  return pattern
    .replace(/^\^/, '')
    .replace(/\$$/, '')
    .replace(/\[a-z\]\+/g, 'abc')
    .replace(/\[0-9\]\+/g, '42')
    .replace(/\.\*/g, 'x')
    .replace(/\\\./g, '.');
}

/** Requests over the input's hostnames, paths, methods, headers and query parameters. */
function requests(dir: string): HttpRequest[] {
  const docs = readdirSync(join(dir, 'input'))
    .flatMap((f) => String(readFileSync(join(dir, 'input', f))).split(/^---$/m))
    .map((d) => parseYaml(d) as { kind?: string; spec?: Record<string, unknown> } | null)
    .filter((d): d is { kind: string; spec: Record<string, unknown> } => Boolean(d?.kind));
  const hosts = new Set<string>(['unknown.invalid']);
  const paths = new Set<string>(['/', '/other']);
  const headers: Record<string, string>[] = [{}];
  const queries = new Set<string>(['']);
  for (const d of docs) {
    if (d.kind === 'Gateway')
      for (const l of (d.spec.listeners as { hostname?: string }[] | undefined) ?? [])
        hosts.add((l.hostname ?? 'any.example.net').replace(/^\*/, 'any'));
    if (d.kind !== 'HTTPRoute' && d.kind !== 'GRPCRoute') continue;
    for (const h of (d.spec.hostnames as string[] | undefined) ?? []) hosts.add(h.replace(/^\*/, 'any'));
    for (const rule of (d.spec.rules as { matches?: Record<string, unknown>[] }[] | undefined) ?? [])
      for (const m of rule.matches ?? []) {
        const p = m.path as { type?: string; value: string } | undefined;
        if (p?.type === 'RegularExpression') paths.add(sampleFor(p.value));
        else if (p) {
          paths.add(p.value);
          paths.add(`${p.value.replace(/\/$/, '')}/x`);
        }
        const g = m.method as { service?: string; method?: string } | string | undefined;
        if (g && typeof g === 'object') {
          paths.add(`/${g.service ?? 'any.Svc'}/${g.method ?? 'Any'}`);
          paths.add(`/${g.service ?? 'any.Svc'}/Other`);
        }
        for (const h of (m.headers as { type?: string; name: string; value: string }[] | undefined) ?? []) {
          // a header RegularExpression is a deliberate difference (Kuadrant compares it as a string):
          // only a value neither takes
          if (h.type !== 'RegularExpression') headers.push({ [h.name]: h.value });
          headers.push({ [h.name]: 'nope' });
        }
        for (const q of (m.queryParams as { type?: string; name: string; value: string }[] | undefined) ??
          []) {
          if (q.type === 'RegularExpression') {
            queries.add(`${q.name}=`);
            continue;
          }
          queries.add(`${q.name}=${q.value}`);
          queries.add(`${q.name}=nope`);
        }
      }
  }
  const out: HttpRequest[] = [];
  for (const host of hosts)
    for (const path of paths)
      for (const q of queries)
        for (const method of ['GET', 'POST', 'DELETE'])
          for (const h of headers)
            for (const extra of [{}, { 'x-client': 'c1', 'x-user': 'u1' }, { 'x-client': 'c2' }] as Record<
              string,
              string
            >[])
              out.push({
                host,
                method,
                path: q ? `${path}?${q}` : path,
                headers: { ...h, ...extra },
                // what Authorino resolved (auth runs before a limit that reads auth.*)
                identity: { sub: 'user-1', userid: 'user-1', plan: 'gold' },
              });
  return out;
}

const scenarios = existsSync(GOLDENS)
  ? readdirSync(GOLDENS).filter((d) => existsSync(join(GOLDENS, d, 'input')))
  : [];

describe('Cascade against kuadrant-operator (../shared/kuadrant-goldens)', () => {
  it('finds the goldens', () => {
    expect(
      scenarios.length,
      `scenarios in ${GOLDENS} (the repository's ../shared, or $CASCADE_SHARED)`,
    ).toBeGreaterThanOrEqual(5);
  });

  for (const scenario of scenarios)
    for (const form of ['kuadrant-v1.4.6', 'kuadrant-main'] as const) {
      const file = join(GOLDENS, scenario, `${form}.json`);
      it(`${scenario}: ${form}`, () => {
        const golden = JSON.parse(String(readFileSync(file))) as Golden;
        const loaded = loadManifests([join(GOLDENS, scenario, 'input')]);
        expect(loaded.problems).toEqual([]);
        const world = buildGatewayWorld(loaded.manifests);
        const wirings = gatewayWirings(world);
        const ours = new Map(wirings.map((w) => [w.gateway, w.wiring.config]));
        /** The ports the gateway's proxy listens on (destination.port). */
        const portsOf = (gw: string): (number | undefined)[] => {
          const w = wirings.find((x) => x.gateway === gw);
          const ports = [
            ...new Set((w?.wiring.paths ?? []).flatMap((p) => (p.port === undefined ? [] : [p.port]))),
          ];
          return ports.length ? ports : [undefined];
        };
        const rendered = renderedObjects(world);
        const ourLimits = rendered
          .filter((o) => o.kind === 'ConfigMap')
          .flatMap(
            (o) => parseYaml((o.data as Record<string, string>)['limits.yaml']!) as CountedLimitSpec[],
          );
        const ourAuth = (scope: string) =>
          normalize(
            rendered.find(
              (o) => o.kind === 'AuthConfig' && (o.spec as { hosts: string[] }).hosts.includes(scope),
            )?.spec,
          );
        const theirAuth = (scope: string) =>
          normalize(golden.authConfigs.find((a) => a.name === scope)?.spec);
        const gateways = Object.keys(golden.gateways).filter(
          (g) => golden.gateways[g]!.wasmConfig?.actionSets,
        );
        if (gateways.length === 0) {
          // v1.4.6 does not know the target (GRPCRoute): nothing is wired there; Cascade does wire it
          expect(form).toBe('kuadrant-v1.4.6');
          expect(JSON.stringify(golden)).toContain('was not found');
          expect(gatewayWirings(world).length).toBeGreaterThan(0);
          return;
        }
        let compared = 0;
        let matched = 0;
        let builderErrors = 0;
        for (const gw of gateways) {
          const theirs = golden.gateways[gw]!.wasmConfig;
          const typed = form === 'kuadrant-main';
          const mine = ours.get(gw);
          expect(mine, `Cascade wires ${gw}`).toBeDefined();
          // main's typed form against Cascade's typed form, v1.4.6's legacy form against Cascade's
          const trace = (c: WasmConfig, r: HttpRequest) => traceRequest(c, r);
          const theirTrace = (r: HttpRequest) =>
            typed
              ? traceTypedRequest(theirs as unknown as TypedWasmConfig, r)
              : trace(theirs as unknown as WasmConfig, r);
          const myTyped = typed ? toTypedConfig(mine!, DEFAULT_WIRING) : undefined;
          const myTrace = (r: HttpRequest) => (myTyped ? traceTypedRequest(myTyped, r) : trace(mine!, r));
          const ports = portsOf(gw);
          for (const req of requests(join(GOLDENS, scenario))) {
            const b = outcome(theirTrace(req), theirAuth, golden.limitadorLimits);
            const deliberate = (DELIBERATE[scenario] ?? []).filter((d) => d.hosts.test(req.host));
            const byPort = ports.map((port) =>
              withoutLimits(
                outcome(myTrace({ ...req, ...(port ? { port } : {}) }), ourAuth, ourLimits),
                deliberate.flatMap((d) => d.extraLimits),
              ),
            );
            compared++;
            if (b !== 'no-match') matched++;
            if (b !== 'no-match' && b.some((x) => 'typedBuilderError' in x)) builderErrors++;
            const theirs = withoutLimits(
              b,
              deliberate.flatMap((d) => d.extraLimits),
            );
            const same =
              byPort.find((a) => JSON.stringify(a) === JSON.stringify(theirs)) ??
              byPort.find((a) => a !== 'no-match') ??
              byPort[0];
            expect(
              same,
              `${req.method} ${req.host}${req.path} ${JSON.stringify(req.headers)} (ports ${ports.join(', ')})`,
            ).toEqual(theirs);
          }
        }
        // the generator reaches the configurations: most requests meet an action set; requests whose
        // typed message cannot be built (a counter that does not resolve) are compared too, and stay
        // a minority
        expect(compared).toBeGreaterThan(50);
        expect(builderErrors).toBeLessThan(compared / 2);
        expect(matched).toBeGreaterThan(compared / 20);
      });
    }
});
