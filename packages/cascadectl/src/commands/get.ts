// cascadectl get effective [-n NS | -A] [ROUTE]: the EffectivePolicy objects the controllers
// published in a live cluster (--kubeconfig / --context), as a tenant with the `view` role reads
// them: what applies to each route, from which policies.
import { stringify } from 'yaml';
import { type Command, oneOf, out, table, UsageError } from '../cli.ts';
import { liveOptions, readEffectivePolicies } from '../cluster.ts';
import { GATEWAY_KINDS, resolveKind } from '../kinds.ts';

export const getEffectiveCommand: Command = {
  name: 'get effective',
  summary: 'the EffectivePolicy objects published in a live cluster (needs --kubeconfig or --context)',
  usage: 'cascadectl get effective [ROUTE] [-n NS | -A] [--kind K] [-o table|json|yaml] --kubeconfig PATH',
  options: {
    namespace: { type: 'string', short: 'n' },
    'all-namespaces': { type: 'boolean', short: 'A' },
    kind: { type: 'string' },
    output: { type: 'string', short: 'o' },
  },
  async run(values, positionals) {
    const format = oneOf('output', values.output, ['table', 'json', 'yaml'], 'table');
    const live = liveOptions();
    if (!live) throw new UsageError('reads a live cluster: give --kubeconfig PATH and/or --context NAME');
    if (positionals.length > 1) throw new UsageError('at most one ROUTE');
    const ns = values['all-namespaces'] ? undefined : String(values.namespace ?? 'default');
    let items = await readEffectivePolicies(live, ns);
    if (positionals[0]) items = items.filter((e) => e.spec.targetRef.name === positionals[0]);
    const kind = resolveKind(values.kind, GATEWAY_KINDS);
    if (kind) items = items.filter((e) => e.spec.policyKind === kind);
    if (format === 'json') out(JSON.stringify(items, null, 2));
    else if (format === 'yaml')
      out(items.map((i) => stringify(i, { aliasDuplicateObjects: false })).join('---\n'));
    else if (!items.length) out(`no EffectivePolicies${ns ? ` in namespace ${ns}` : ''}`);
    else
      out(
        table([
          ['NAMESPACE', 'TARGET', 'POLICY KIND', 'RULES', 'SOURCES'],
          ...items.map((e) => {
            const rules = new Set(e.spec.paths.flatMap((p) => Object.keys(p.rules)));
            return [
              e.metadata.namespace,
              `${e.spec.targetRef.kind}/${e.spec.targetRef.name}`,
              e.spec.policyKind,
              [...rules].sort().join(','),
              e.spec.sources.map((s) => `${s.namespace}/${s.name}`).join(','),
            ];
          }),
        ]),
      );
    return 0;
  },
};
