import { policyConditions, policyName } from '@cascade/core';
import {
  lintNetpol,
  type NetpolEngine,
  type StagedPolicy,
  stagedErrors,
  stagedTarget,
  stagedTargetName,
} from '@cascade/netpolicy';
import { type Command, oneOf, out } from '../cli.ts';
import { GATEWAY_KINDS, NETPOL_KINDS, resolveKind } from '../kinds.ts';
import { namespaceOf, namespaceOptions } from '../selector.ts';
import type { GatewayWorld } from '../world.ts';
import { loadBothWorlds } from './gateway-common.ts';

export interface Finding {
  severity: 'error' | 'warning';
  kind: string;
  object: string;
  /** The object's namespace (cluster-scoped objects have none). */
  namespace?: string;
  message: string;
}

/** `{namespace}` of `ns/name`; nothing for a plain (cluster-scoped) name. */
const withNs = (nsName: string): { namespace?: string } =>
  nsName.includes('/') ? { namespace: nsName.split('/')[0]! } : {};

export const lintCommand: Command = {
  name: 'lint',
  summary:
    'warnings: equal-priority overlapping ANPs, shadowed baseline rules, refused unsets, policies that apply nowhere, missing targets',
  usage:
    'cascadectl lint FILES... [--kind K] [-n NS | -A] [-o table|json] [--strict]   (exit 1 on invalid objects, with --strict on warnings too; 2 on unreadable input; -n: findings on objects of that namespace)',
  options: {
    kind: { type: 'string' },
    ...namespaceOptions,
    output: { type: 'string', short: 'o' },
    strict: { type: 'boolean' },
  },
  run(values, files) {
    const format = oneOf('output', values.output, ['table', 'json'], 'table');
    const {
      gateway: { world, problems: p1 },
      netpol: { engine: np, problems: p2, staged },
    } = loadBothWorlds(files);
    const findings = [...lintFindings(world, np), ...stagedFindings(np, staged)];
    const only = resolveKind(values.kind, [...GATEWAY_KINDS, ...NETPOL_KINDS]);
    const ns = namespaceOf(values);
    const shown = findings.filter(
      (f) => (!only || f.kind === only) && (ns === undefined || f.namespace === ns),
    );
    if (format === 'json') out(JSON.stringify(shown, null, 2));
    else
      out(
        shown.length
          ? shown.map((f) => `${f.severity}: ${f.object}: ${f.message}`).join('\n')
          : 'no findings',
      );
    if (p1 + p2 > 0) return 2;
    if (shown.some((f) => f.severity === 'error')) return 1;
    return values.strict && shown.length > 0 ? 1 : 0;
  },
};

/**
 * Staged objects as their status would read: a staged Set the standard kind would refuse (an error,
 * the fields named), a Delete of a policy the files do not hold (a warning).
 */
export function stagedFindings(np: NetpolEngine, staged: { policy: StagedPolicy }[]): Finding[] {
  const out: Finding[] = [];
  for (const { policy: s } of staged) {
    const name = `${s.policy.namespace ? `${s.policy.namespace}/` : ''}${s.policy.name}`;
    const at = {
      kind: s.kind,
      object: `${s.kind} ${name}`,
      ...(s.policy.namespace ? { namespace: s.policy.namespace } : {}),
    };
    const errors = stagedErrors(s);
    if (errors.length)
      out.push({
        severity: 'error',
        ...at,
        message: `${stagedTargetName(s)} would be refused: ${errors.join('; ')}`,
      });
    else if (s.action === 'Delete' && !np.policies.has(stagedTarget(s)))
      out.push({ severity: 'warning', ...at, message: `there is no ${stagedTargetName(s)} to delete` });
  }
  return out;
}

/** Every finding of both worlds: gateway policies (refused unsets, invalid, not found, applies nowhere) and network policy. */
export function lintFindings(world: GatewayWorld, np: NetpolEngine): Finding[] {
  const findings: Finding[] = [];
  for (const [, engine] of world.engines) {
    const refused = new Set<string>();
    for (const [, r] of engine.results()) {
      for (const u of r.refusedUnsets) {
        const k = `${policyName(u.by)} ${u.key}`;
        if (refused.has(k)) continue;
        refused.add(k);
        findings.push({
          severity: 'warning',
          kind: engine.kind.kind,
          object: `${engine.kind.kind} ${policyName(u.by)}`,
          ...withNs(policyName(u.by)),
          message: `unset of ${u.key} has no effect: it is an override of ${policyName(u.override)}`,
        });
      }
    }
    for (const id of [...engine.policyIds()].sort()) {
      const conds = policyConditions(engine, id);
      const accepted = conds.find((c) => c.type === 'Accepted');
      const enforced = conds.find((c) => c.type === 'Enforced');
      const obj = `${engine.kind.kind} ${id.split(':')[1]}`;
      const kind = engine.kind.kind;
      const at = withNs(id.split(':')[1] ?? '');
      if (accepted?.status === 'False' && accepted.reason === 'Invalid')
        findings.push({ severity: 'error', kind, object: obj, ...at, message: accepted.message });
      else if (accepted?.reason === 'TargetNotFound')
        findings.push({ severity: 'warning', kind, object: obj, ...at, message: accepted.message });
      else if (accepted?.status === 'True' && enforced?.status === 'False')
        findings.push({
          severity: 'warning',
          kind,
          object: obj,
          ...at,
          message: `applies nowhere: ${enforced.message}`,
        });
    }
  }
  for (const f of lintNetpol(np))
    findings.push({
      severity: f.severity,
      kind: f.policy.split('/')[0]!,
      object: f.policy,
      ...withNs(f.policy.split('/').slice(1).join('/')),
      message: f.message,
    });
  return findings;
}
