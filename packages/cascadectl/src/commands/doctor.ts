// cascadectl doctor: one screen of an install's health (health.ts): the API server, the CRDs by name
// and served version, each component's readiness and restarts, Authorino and Limitador behind the
// addresses the wiring-controller was given, the GatewayClasses, and each node's agent (its program,
// its version, cascade-cni in the CNI chain). Each missing piece says what to do. Exit 1 when a check
// fails (CI can gate on it); warnings alone exit 0 (--strict: 1).
import { type Command, oneOf, out, table, UsageError } from '../cli.ts';
import { clientFor, liveOptions } from '../cluster.ts';
import { type Check, diagnose, gatherHealth } from '../health.ts';

const MARK = { ok: 'ok', warn: 'WARN', fail: 'FAIL' } as const;

export function formatDoctor(checks: Check[]): string {
  const lines = [
    table([
      ['AREA', 'CHECK', 'STATUS', 'DETAIL'],
      ...checks.map((c) => [c.area, c.name, MARK[c.status], c.detail]),
    ]),
  ];
  const todo = checks.filter((c) => c.status !== 'ok' && c.fix);
  if (todo.length) {
    lines.push('', 'To do:');
    for (const c of todo) lines.push(`  ${MARK[c.status]} ${c.name}: ${c.fix}`);
  }
  const n = (s: Check['status']) => checks.filter((c) => c.status === s).length;
  lines.push('', `${n('ok')} ok, ${n('warn')} warning(s), ${n('fail')} failed`);
  return lines.join('\n');
}

export const doctorCommand: Command = {
  name: 'doctor',
  summary:
    "an install's health in one screen: CRDs, components, Authorino and Limitador, gateway classes, each node's agent and CNI chain, and what to do",
  usage: 'cascadectl doctor --kubeconfig PATH [--release-namespace NS] [-o text|json] [--strict]',
  options: {
    'release-namespace': { type: 'string' },
    output: { type: 'string', short: 'o' },
    strict: { type: 'boolean' },
  },
  async run(values) {
    const format = oneOf('output', values.output, ['text', 'json'], 'text');
    const live = liveOptions();
    if (!live) throw new UsageError('doctor reads a live cluster: give --kubeconfig PATH or --context NAME');
    const ns = String(values['release-namespace'] ?? 'cascade-system');
    if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(ns))
      throw new UsageError(`--release-namespace: "${ns.slice(0, 70)}" is not a namespace name`);
    let checks: Check[];
    try {
      checks = diagnose(await gatherHealth(await clientFor(live), ns));
    } catch (e) {
      checks = [
        {
          area: 'api',
          name: 'API server',
          status: 'fail',
          detail: `not reachable: ${(e as Error).message.split('\n')[0]!.slice(0, 200)}`,
          fix: 'check the kubeconfig, its context and the network path to the API server',
        },
      ];
    }
    if (format === 'json') out(JSON.stringify({ checks }, null, 2));
    else out(formatDoctor(checks));
    if (checks.some((c) => c.status === 'fail')) return 1;
    return values.strict && checks.some((c) => c.status === 'warn') ? 1 : 0;
  },
};
