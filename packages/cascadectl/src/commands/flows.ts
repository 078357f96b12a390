// cascadectl flows: the flows a node's agent saw its BPF program deny (and allow, for audited
// endpoints), with the deciding policy and rule, like `hubble observe`. From an agent's endpoint
// (`--agent http://HOST:9090`, e.g. through a port-forward), or from the agent on `--node N` through
// the API server's pods/exec (with --kubeconfig / --context): the agent serves flows on its loopback
// only, and its own flows-read copies them out.
import { onAgent } from '../agent-exec.ts';
import { type Command, oneOf, out, table, UsageError } from '../cli.ts';

/** The agent image's node and the reader of its flow stream (packages/netpolicy/src/agent/flows-read.ts). */
export const FLOWS_READ = ['/usr/local/bin/node', '/app/packages/netpolicy/src/agent/flows-read.ts'];

interface Flow {
  time: string;
  node: string;
  direction: string;
  verdict: string;
  from: string;
  to: string;
  protocol: string;
  port: number;
  rule?: string;
  reason?: string;
}

/** What decided a flow when the kernel names no rule: why, from the event's reason. */
export function decidedBy(f: Pick<Flow, 'rule' | 'reason' | 'verdict' | 'direction'>): string {
  if (f.rule) return f.rule;
  if (f.reason === 'fail-closed')
    return 'fail closed (its rule set was refused, or the endpoint is not known yet)';
  if (f.reason === 'rejudged') return 'rejudged after a policy change';
  return f.verdict.toLowerCase() === 'deny'
    ? `no rule allows it: the pod is isolated for ${f.direction} (default deny)`
    : 'no rule denies it (default allow)';
}

const row = (f: Flow) => [
  f.time.replace('T', ' ').replace(/\.\d+Z$/, 'Z'),
  f.node,
  f.direction,
  f.from,
  f.to,
  `${f.protocol}/${f.port}`,
  f.verdict.toUpperCase(),
  decidedBy(f),
];
const HEADER = ['TIME', 'NODE', 'DIRECTION', 'FROM', 'TO', 'PROTO/PORT', 'VERDICT', 'DECIDED BY'];

export const flowsCommand: Command = {
  name: 'flows',
  summary:
    "flows a node's BPF program denied (and audited allows), with the deciding rule (like hubble observe)",
  usage:
    'cascadectl flows (--agent URL | --node N --kubeconfig PATH) [--follow] [--verdict deny|allow] [-n NS] [-o table|json]',
  options: {
    agent: { type: 'string' },
    node: { type: 'string' },
    follow: { type: 'boolean', short: 'f' },
    verdict: { type: 'string' },
    namespace: { type: 'string', short: 'n' },
    output: { type: 'string', short: 'o' },
  },
  async run(values) {
    const format = oneOf('output', values.output, ['table', 'json'], 'table');
    const verdict =
      values.verdict === undefined ? undefined : oneOf('verdict', values.verdict, ['deny', 'allow'], 'deny');
    const query = new URLSearchParams();
    if (verdict) query.set('verdict', verdict);
    if (values.namespace) query.set('namespace', String(values.namespace));
    const print = (flows: Flow[], header: boolean) => {
      if (format === 'json') for (const f of flows) out(JSON.stringify(f));
      else if (flows.length) out(table(header ? [HEADER, ...flows.map(row)] : flows.map(row)));
    };
    const parse = (text: string) =>
      text
        .split('\n')
        .filter((l) => l.trim())
        .flatMap((l) => {
          try {
            const f = JSON.parse(l) as Flow;
            return typeof f === 'object' && f && typeof f.from === 'string' ? [f] : [];
          } catch {
            return []; // not a flow (a line cut by a closed stream): left out
          }
        });
    if (values.agent) {
      const base = String(values.agent).replace(/\/$/, '');
      if (!/^https?:\/\//.test(base))
        throw new UsageError('--agent: an http(s) URL of an agent (its metrics port)');
      if (values.follow) query.set('follow', '1');
      const res = await fetch(`${base}/flows?${query}`);
      if (!res.ok || !res.body) throw new UsageError(`--agent ${base}: ${res.status} ${res.statusText}`);
      if (!values.follow) {
        print(parse(await res.text()), true);
        return 0;
      }
      out(format === 'table' ? HEADER.join('  ') : '');
      let buf = '';
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buf += Buffer.from(chunk).toString('utf8');
        const lines = buf.split('\n');
        buf = lines.pop() ?? '';
        print(parse(lines.join('\n')), false);
      }
      return 0;
    }
    if (!values.node) throw new UsageError('give --agent URL, or --node N with --kubeconfig/--context');
    // The agent serves flows on its loopback only (they name every tenant's pods): they are read by
    // its own flows-read inside the container, through pods/exec (cluster admins), as cilium-dbg.
    const agent = await onAgent('--node', String(values.node), 'the flows');
    if (format === 'table' && values.follow) out(HEADER.join('  '));
    const collected: Flow[] = [];
    await agent.run([...FLOWS_READ, query.toString(), ...(values.follow ? ['--follow'] : [])], (lines) => {
      const flows = parse(lines.join('\n'));
      if (values.follow) print(flows, false);
      else collected.push(...flows);
    });
    if (!values.follow) print(collected, true);
    return 0;
  },
};
