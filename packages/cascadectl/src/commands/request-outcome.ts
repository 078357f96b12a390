// What the client gets for a request traced through a gateway's wasm-shim configuration: the first
// step that answers it decides, in wasm-shim's order (wasm-shim v0.12: kuadrant/pipeline/tasks):
//   - the proxy has no route: 404 from the proxy;
//   - no action set matches: the backend's answer (wasm-shim does nothing);
//   - auth: no AuthConfig for the scope: Authorino denies (404 Not Found); authentication with no
//     credential given (no --identity, no anonymous method): 401; otherwise authorization decides
//     (its evaluators are not run offline: 200 if they allow, 403 if not) and the next action runs;
//   - ratelimit: a descriptor entry that does not evaluate fails the action: 500 Internal Server
//     Error with failure mode deny, the action skipped with allow; otherwise the limits it counts
//     against: 429 once a counter reaches its limit in the window (--hits: the requests already
//     counted), else the next action;
//   - token check (TokenRateLimitPolicy, before the request): Limitador's CheckRateLimit checks one
//     hit whatever hits_addend says (limitador-server's kuadrant_service.rs), so it answers over limit
//     once a counter holds its limit or more (--tokens: the tokens already counted); one response may
//     take a counter past its limit and the next request gets 429;
//   - token report (on the response): the tokens the response reports (usage.total_tokens) are
//     added; it never changes this response. A body without usage, not JSON, or a stream cut short
//     counts nothing (wasm-shim cannot build the report);
//   - a typed message that cannot be built: the call is not made and the service's failure mode
//     applies (deny: 500, allow: skipped);
//   - all passed: the backend's answer (200 here).
// The same order and codes are in the README's `cascadectl request` section.

export interface RequestOutcome {
  /** The HTTP status the client gets; undefined: the backend's own answer (Cascade does not decide it). */
  status?: number;
  /** One sentence: why. */
  why: string;
  /** What is assumed and not evaluated offline (authorization evaluators, credentials), if anything. */
  assumes?: string;
  /** Each action's part, in order. */
  steps: string[];
  /** The index of the action that answered (later ones are not reached); undefined: none did. */
  decidedAt?: number;
}

interface ActionView {
  type: string;
  service: string;
  run: boolean;
  why?: string;
  hits?: number;
  builderError?: string;
  blocks?: { holds: boolean; entries: { key: string; error?: string }[] }[];
  auth?: { authConfig?: string; evaluators: { name: string }[] };
  counted?: { name?: string; max_value: number; seconds: number; namespace: string }[];
}

export function requestOutcome(opts: {
  routed: boolean;
  matched: boolean;
  actions: readonly ActionView[];
  failureModes: Readonly<Record<string, 'allow' | 'deny'>>;
  identity: boolean;
  /** The AuthConfig's authentication methods, by evaluator name (`jwt`, `apiKey`, `anonymous`...). */
  authMethods: (authConfig: string) => string[];
  hits: number;
  /** Tokens already counted in the window (token limits). */
  tokens?: number;
}): RequestOutcome {
  if (!opts.routed) return { status: 404, why: 'the proxy has no route for it', steps: [] };
  if (!opts.matched)
    return {
      why: "no action set matches: wasm-shim does nothing, the backend's answer reaches the client",
      steps: [],
    };
  const steps: string[] = [];
  const assumed: string[] = [];
  const tokens = opts.tokens ?? 0;
  for (const [decidedAt, a] of opts.actions.entries()) {
    if (a.builderError && a.type !== 'ratelimit-report') {
      const mode = opts.failureModes[a.service] ?? 'deny';
      const what = `${a.service}: its message cannot be built (${a.builderError})`;
      if (mode === 'deny')
        return {
          status: 500,
          why: `${what}: failure mode deny answers 500 Internal Server Error`,
          steps,
          decidedAt,
          ...(assumed.length ? { assumes: assumed.join('; ') } : {}),
        };
      steps.push(`${what}: failure mode allow skips it (not limited)`);
      continue;
    }
    if (a.type === 'ratelimit-report') {
      const counted = a.counted ?? [];
      steps.push(
        !a.run
          ? `token report: nothing counted (${a.why})`
          : counted.length
            ? `token report: the response's ${a.hits} tokens are added to ${counted.map((c) => `${c.name ?? 'a limit'} (${c.max_value} per ${c.seconds} s)`).join(', ')}: with ${tokens} already counted the counter holds ${tokens + (a.hits ?? 0)}, so the next request gets ${counted.some((c) => tokens + (a.hits ?? 0) >= c.max_value) ? '429' : 'through'}`
            : 'token report: no limit counts it',
      );
      continue;
    }
    if (!a.run) continue;
    if (a.type === 'ratelimit-check') {
      const counted = a.counted ?? [];
      const over = counted.filter((c) => tokens >= c.max_value);
      if (over.length)
        return {
          status: 429,
          why: `${a.service}: ${over.map((c) => `${c.name ?? 'a limit'} (${c.max_value} tokens per ${c.seconds} s in ${c.namespace})`).join(', ')} already counted ${tokens} tokens in the window: Limitador's check answers over limit`,
          steps: [...steps, 'token check: 429 Too Many Requests'],
          decidedAt,
          ...(assumed.length ? { assumes: assumed.join('; ') } : {}),
        };
      steps.push(
        counted.length
          ? `token check: ${counted.map((c) => `${c.name ?? 'a limit'} (${c.max_value} per ${c.seconds} s)`).join(', ')} hold ${tokens} tokens, under their limits: passes`
          : 'token check: no limit counts it',
      );
      continue;
    }
    if (a.type === 'auth') {
      const ac = a.auth?.authConfig;
      if (!ac)
        return {
          status: 404,
          why: `${a.service}: no AuthConfig declares this host, so Authorino denies it (Not Found)`,
          steps,
          decidedAt,
        };
      const methods = opts.authMethods(ac);
      const authz = a.auth!.evaluators.filter((e) => e.name.startsWith('authorization.')).map((e) => e.name);
      if (methods.length && !methods.includes('anonymous') && !opts.identity)
        return {
          status: 401,
          why: `${a.service}: AuthConfig ${ac} authenticates with ${[...new Set(methods)].join(', ')} and the request carries no credential (give --identity JSON to act as an authenticated caller)`,
          steps: [...steps, 'auth: 401 Unauthorized'],
          decidedAt,
        };
      if (authz.length) assumed.push(`authorization ${authz.join(', ')} allows (else 403 Forbidden)`);
      if (opts.identity) assumed.push('the --identity is what authentication yields');
      steps.push(`auth: AuthConfig ${ac} passes${authz.length ? ' if authorization allows' : ''}`);
      continue;
    }
    if (a.type === 'ratelimit') {
      const broken = (a.blocks ?? []).flatMap((b) => (b.holds ? b.entries.filter((e) => e.error) : []));
      if (broken.length) {
        const mode = opts.failureModes[a.service] ?? 'deny';
        const what = `${a.service}: ${broken.map((e) => `${e.key} does not evaluate (${e.error})`).join('; ')}`;
        if (mode === 'deny')
          return {
            status: 500,
            why: `${what}: the action fails and failure mode deny answers 500 Internal Server Error`,
            steps,
            decidedAt,
            ...(assumed.length ? { assumes: assumed.join('; ') } : {}),
          };
        steps.push(`${what}: the action fails and failure mode allow skips it (not limited)`);
        continue;
      }
      const counted = a.counted ?? [];
      const over = counted.filter((c) => opts.hits >= c.max_value);
      if (over.length)
        return {
          status: 429,
          why: `${a.service}: ${over.map((c) => `${c.name ?? 'a limit'} (${c.max_value} per ${c.seconds} s in ${c.namespace})`).join(', ')} already counted ${opts.hits} request(s) in the window: Limitador answers over limit`,
          steps: [...steps, 'ratelimit: 429 Too Many Requests'],
          decidedAt,
          ...(assumed.length ? { assumes: assumed.join('; ') } : {}),
        };
      steps.push(
        counted.length
          ? `ratelimit: counted against ${counted
              .map((c) => `${c.name ?? 'a limit'} (${c.max_value} per ${c.seconds} s)`)
              .join(
                ', ',
              )}; request ${Math.min(...counted.map((c) => c.max_value)) + 1} within the window gets 429`
          : 'ratelimit: no limit counts it',
      );
    }
  }
  return {
    status: 200,
    why: "every action lets it through: the backend's answer (200 if it serves it)",
    steps,
    ...(assumed.length ? { assumes: assumed.join('; ') } : {}),
  };
}

const REASON: Record<number, string> = {
  200: 'OK',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
};

/** The outcome as the text output's closing lines. */
export function outcomeLines(o: RequestOutcome): string[] {
  const head =
    o.status === undefined
      ? "the client gets: the backend's answer"
      : `the client gets: ${o.status} ${REASON[o.status] ?? ''}`.trimEnd();
  return [
    `${head}: ${o.why}`,
    ...o.steps.map((s) => `  ${s}`),
    ...(o.assumes ? [`  assuming: ${o.assumes}`] : []),
  ];
}
