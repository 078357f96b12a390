// AuthPolicy (cascade.dev/v1alpha1): field-compatible with Kuadrant's v1 AuthPolicy (Authorino's
// v1beta3 evaluators under `rules`), plus the D/O extensions core provides.
import {
  definePolicyKind,
  predicateIssues,
  predicateListSchema,
  predicateSchema,
  type SpecIssue,
} from '@cascade/core';
import { z } from 'zod';
import { authActions, INVALID_POLICY_RULE, renderAuthConfigs } from './render.ts';

const body = z.record(z.string(), z.unknown());

const OPERATORS = ['eq', 'neq', 'incl', 'excl', 'matches'] as const;
/** Authorino's PatternExpression: the only form a named pattern (`patterns.*.allOf`) holds. */
const patternExpression = z.strictObject({
  selector: z.string().min(1).max(1024),
  operator: z.enum(OPERATORS),
  value: z.string().max(4096),
});

/** How deep `all`/`any` may nest in one condition (Authorino sets no bound; a tenant's input must have one). */
export const MAX_PATTERN_DEPTH = 4;

/**
 * Authorino's PatternExpressionOrRef, as Kuadrant's evaluators take it in `when` and patternMatching:
 * a pattern expression, a `patternRef` to a named pattern, a CEL `predicate`, or `all` / `any` of
 * these, nested at most MAX_PATTERN_DEPTH deep. Exactly one form per item.
 */
function patternExpressionOrRef(depth: number): z.ZodType {
  const forms: z.ZodType[] = [
    patternExpression,
    z.strictObject({ patternRef: z.string().min(1).max(253) }),
    predicateSchema,
  ];
  if (depth > 1) {
    const inner = z
      .array(patternExpressionOrRef(depth - 1))
      .min(1)
      .max(64);
    forms.push(z.strictObject({ all: inner }), z.strictObject({ any: inner }));
  }
  return z.union(forms as [z.ZodType, z.ZodType, ...z.ZodType[]]);
}
const conditionsSchema = z.array(patternExpressionOrRef(MAX_PATTERN_DEPTH)).max(64);

/** Fields every Authorino evaluator may carry besides its one method. */
const common = {
  when: conditionsSchema.optional(),
  metrics: z.boolean().optional(),
  priority: z.number().int().min(0).max(1000).optional(),
  cache: z.strictObject({ key: body, ttl: z.number().int().min(0).optional() }).optional(),
};

function evaluator<M extends string>(methods: readonly M[], extra: z.ZodRawShape = {}) {
  const shape: Record<string, z.ZodType> = { ...common, ...extra };
  for (const m of methods) shape[m] ??= body.optional();
  return z.strictObject(shape);
}

export const AUTHENTICATION_METHODS = [
  'apiKey',
  'jwt',
  'kubernetesTokenReview',
  'oauth2Introspection',
  'x509',
  'plain',
  'anonymous',
] as const;
export const METADATA_METHODS = ['http', 'userInfo', 'uma'] as const;
export const AUTHORIZATION_METHODS = [
  'opa',
  'patternMatching',
  'kubernetesSubjectAccessReview',
  'spicedb',
] as const;
export const SUCCESS_METHODS = ['json', 'plain', 'wristband'] as const;

const authentication = evaluator(AUTHENTICATION_METHODS, {
  credentials: z
    .strictObject({
      authorizationHeader: z.strictObject({ prefix: z.string().optional() }).optional(),
      customHeader: z.strictObject({ name: z.string(), prefix: z.string().optional() }).optional(),
      queryString: z.strictObject({ name: z.string() }).optional(),
      cookie: z.strictObject({ name: z.string() }).optional(),
    })
    .optional(),
  overrides: body.optional(),
  defaults: body.optional(),
});
const denyWith = z.strictObject({
  code: z.number().int().min(100).max(599).optional(),
  message: body.optional(),
  headers: body.optional(),
  body: body.optional(),
});

export const authRulesSchema = z.strictObject({
  authentication: z.record(z.string(), authentication).optional(),
  metadata: z.record(z.string(), evaluator(METADATA_METHODS)).optional(),
  authorization: z
    .record(
      z.string(),
      evaluator(AUTHORIZATION_METHODS, {
        patternMatching: z
          .strictObject({ patterns: z.array(patternExpressionOrRef(MAX_PATTERN_DEPTH)).min(1).max(64) })
          .optional(),
      }),
    )
    .optional(),
  response: z
    .strictObject({
      unauthenticated: denyWith.optional(),
      unauthorized: denyWith.optional(),
      success: z
        .strictObject({
          headers: z
            .record(z.string(), evaluator(SUCCESS_METHODS, { key: z.string().optional() }))
            .optional(),
          filters: z
            .record(z.string(), evaluator(SUCCESS_METHODS, { key: z.string().optional() }))
            .optional(),
        })
        .optional(),
    })
    .optional(),
  callbacks: z.record(z.string(), evaluator(['http'])).optional(),
});

const SECTIONS: Record<string, readonly string[]> = {
  authentication: AUTHENTICATION_METHODS,
  metadata: METADATA_METHODS,
  authorization: AUTHORIZATION_METHODS,
  'response.success.headers': SUCCESS_METHODS,
  'response.success.filters': SUCCESS_METHODS,
  callbacks: ['http'],
};

/** Each evaluator must name exactly one method (apiKey, jwt, opa, ...). */
function methodIssues(spec: Record<string, unknown>): SpecIssue[] {
  const issues: SpecIssue[] = [];
  const check = (ruleSet: unknown, base: string) => {
    const rules = (ruleSet as { rules?: Record<string, unknown> } | undefined)?.rules;
    if (!rules) return;
    for (const [section, methods] of Object.entries(SECTIONS)) {
      let map: unknown = rules;
      for (const p of section.split('.')) map = (map as Record<string, unknown> | undefined)?.[p];
      for (const [name, ev] of Object.entries((map as Record<string, Record<string, unknown>>) ?? {})) {
        const present = methods.filter((m) => ev[m] !== undefined);
        if (present.length !== 1) {
          issues.push({
            field: `${base}.rules.${section}.${name}`,
            message:
              present.length === 0
                ? `needs one of ${methods.join(', ')}`
                : `sets ${present.join(' and ')}; exactly one is allowed`,
          });
        }
      }
    }
  };
  check(spec, 'spec');
  check(spec.defaults, 'spec.defaults');
  check(spec.overrides, 'spec.overrides');
  return issues;
}

export const authPolicyKind = definePolicyKind({
  group: 'cascade.dev',
  version: 'v1alpha1',
  kind: 'AuthPolicy',
  plural: 'authpolicies',
  shortNames: ['authpol'],
  targetKinds: ['Gateway', 'HTTPRoute', 'GRPCRoute'],
  ruleSet: {
    rules: authRulesSchema.optional(),
    patterns: z
      .record(z.string(), z.strictObject({ allOf: z.array(patternExpression).min(1).max(64) }))
      .optional(),
    when: predicateListSchema.optional(),
  },
  sections: [
    // Authorino accepts a request when any one authentication method succeeds: alternatives
    { name: 'authentication', path: ['rules', 'authentication'], alternatives: true },
    { name: 'metadata', path: ['rules', 'metadata'] },
    { name: 'authorization', path: ['rules', 'authorization'] },
    { name: 'response', path: ['rules', 'response'], names: ['unauthenticated', 'unauthorized'] },
    { name: 'response.success.headers', path: ['rules', 'response', 'success', 'headers'] },
    { name: 'response.success.filters', path: ['rules', 'response', 'success', 'filters'] },
    { name: 'callbacks', path: ['rules', 'callbacks'] },
    { name: 'patterns', path: ['patterns'] },
  ],
  contextFields: ['when'],
  validate: (spec) => [...predicateIssues(spec), ...methodIssues(spec)],
  // security policy: a path an invalid AuthPolicy names denies every request (render.ts), and every
  // view of the effective policy shows that deny-all, written by the invalid policy
  failClosed: {
    rules: () => [
      {
        section: 'authorization',
        name: INVALID_POLICY_RULE,
        value: { patternMatching: { patterns: [{ predicate: 'false' }] } },
      },
    ],
    effect: 'it fails closed: every request on the path is denied (403) until it is fixed',
  },
  render: (ctx) => renderAuthConfigs(ctx),
  actions: (ctx) => authActions(ctx),
  renders: [
    {
      group: 'authorino.kuadrant.io',
      version: 'v1beta3',
      kind: 'AuthConfig',
      plural: 'authconfigs',
      // Authorino reports whether it serves the AuthConfig (Kuadrant's Enforced waits for it too)
      ready: (live) => (live.status as { summary?: { ready?: boolean } } | undefined)?.summary?.ready,
    },
  ],
});
