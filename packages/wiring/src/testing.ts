// One path through a shared test gateway for the wiring's unit tests and the bench: a route of one
// rule in a namespace, under the hostnames given, with an auth action (scope `<ns>/<name>` unless
// said) or none (`policy: false`).
import type { RouteMatch } from '@cascade/core';
import { AUTH_SERVICE, PHASE, type WiringPath } from './shim/wasm.ts';

export interface TestPathOptions {
  listener?: string;
  /** The port the proxy listens on for the listener. */
  port?: number;
  /** false: a route without policy (no action). */
  policy?: boolean;
  /** The auth action's scope (default `<ns>/<name>`). */
  scope?: string;
  createdAt?: string;
}

/** `matches` undefined: a rule without matches (every request of the hostnames). */
export function testWiringPath(
  namespace: string,
  name: string,
  matches: RouteMatch[] | undefined,
  hostnames: string[],
  opts: TestPathOptions = {},
): WiringPath {
  return {
    path: {
      gatewayClass: 'c',
      gateway: { namespace: 'infra', name: 'shared' },
      listener: opts.listener ?? 'http',
      route: { kind: 'HTTPRoute', namespace, name },
      rule: 'rule-1',
    },
    hostnames,
    route: {
      kind: 'HTTPRoute',
      namespace,
      name,
      parentRefs: [{ name: 'shared', namespace: 'infra' }],
      rules: [matches ? { matches } : {}],
      ...(opts.createdAt ? { createdAt: opts.createdAt } : {}),
    },
    ...(opts.port !== undefined ? { port: opts.port } : {}),
    actions:
      opts.policy === false
        ? []
        : [
            {
              phase: PHASE.auth,
              action: { service: AUTH_SERVICE, scope: opts.scope ?? `${namespace}/${name}` },
            },
          ],
  };
}
