// cascadectl flows: the flows a node's agent saw its BPF program deny (and allow, for audited
// endpoints), with the deciding policy and rule, like `hubble observe`. From an agent's endpoint
// (`--agent http://HOST:9090`, e.g. through a port-forward), or from the agent on `--node N` through
// the API server's pods/exec (with --kubeconfig / --context): the agent serves flows on its loopback
// only, and its own flows-read copies them out.
import { onAgent } from '../agent-exec.ts';
import { type Command, err, oneOf, out, table, UsageError } from '../cli.ts';
import { liveOptions } from '../cluster.ts';
import { hasInput } from '../load.ts';
import { type StagedMark, stagedCell, stagedJudge } from './flows-staged.ts';
import { loadStagedPair } from './netpol-staged.ts';

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
  /** The datapath's own staged judgement (only where the staged set decides otherwise). */
  staged?: { verdict: 'allow' | 'deny'; rule?: string };
}

/** What decided a flow when the kernel names no rule: why, from the event's reason. */
export function decidedBy(f: Pick<Flow, 'rule' | 'reason' | 'verdict' | 'direction'>): string {
  // a rule without `#rule` is a NetworkPolicy isolation entry (the policies isolating the pod)
  if (f.rule) return f.rule.includes('#') ? f.rule : `${f.rule} isolation (no rule of it allows the flow)`;
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
/** The flow records of NDJSON text; a line that is not one (cut by a closed stream) is left out. */
function parseFlows(text: string): Flow[] {
  return text
    .split('\n')
    .filter((l) => l.trim())
    .flatMap((l) => {
      try {
        const f = JSON.parse(l) as Flow;
        return typeof f === 'object' && f && typeof f.from === 'string' ? [f] : [];
      } catch {
        return [];
      }
    });
}

/** A flow the node's datapath marked: its staged verdict and the rule that decides it there. */
function datapathMark(f: Flow): StagedMark {
  const s = f.staged!;
  return {
    verdict: s.verdict,
    changed: true,
    decidedBy: `${f.direction}: ${decidedBy({ verdict: s.verdict, direction: f.direction, ...(s.rule ? { rule: s.rule } : {}) })}; datapath`,
  };
}

const HEADER = ['TIME', 'NODE', 'DIRECTION', 'FROM', 'TO', 'PROTO/PORT', 'VERDICT', 'DECIDED BY'];

export const flowsCommand: Command = {
  name: 'flows',
  summary:
    "flows a node's BPF program denied (and audited allows), with the deciding rule (like hubble observe)",
  usage:
    "cascadectl flows (--agent URL | --node N --kubeconfig PATH) [--follow] [--verdict deny|allow] [-n NS] [-o table|json]\n  cascadectl flows --staged --kubeconfig PATH [--node N | --agent URL] [FILES...] [...]\n  (--staged: each flow judged again by the staged set (every Staged* policy applied) beside the enforced\n   one: STAGED says = or WOULD DENY / WOULD ALLOW with the staged rule; every node's agent without\n   --node. The nodes' datapath judges new flows by the staged tables and reports those it would\n   decide otherwise (marked datapath, shown also without --staged); cascadectl judges the rest)",
  options: {
    agent: { type: 'string' },
    staged: { type: 'boolean' },
    node: { type: 'string' },
    follow: { type: 'boolean', short: 'f' },
    verdict: { type: 'string' },
    namespace: { type: 'string', short: 'n' },
    output: { type: 'string', short: 'o' },
  },
  async run(values, files) {
    const format = oneOf('output', values.output, ['table', 'json'], 'table');
    const verdict =
      values.verdict === undefined ? undefined : oneOf('verdict', values.verdict, ['deny', 'allow'], 'deny');
    const query = new URLSearchParams();
    if (verdict) query.set('verdict', verdict);
    if (values.namespace) query.set('namespace', String(values.namespace));
    if (!values.staged && files.length)
      throw new UsageError(`unexpected ${files[0]}: FILES are the policies --staged judges flows against`);
    if (values.staged && !hasInput(files))
      throw new UsageError('--staged judges the flows against the policies: give --kubeconfig PATH or FILES');
    const pair = values.staged ? loadStagedPair(files) : undefined;
    const judge = pair ? stagedJudge(pair) : undefined;
    const marks = { changed: 0, judged: 0, datapath: 0, by: new Map<string, number>() };
    const markOf = (f: Flow): StagedMark | undefined => {
      // the node judged it by its staged tables itself: that is the answer (it saw the flow's packet)
      const m = f.staged ? datapathMark(f) : judge?.(f);
      if (!m) return undefined;
      if (m.verdict !== undefined) marks.judged++;
      if (f.staged) marks.datapath++;
      if (m.changed) {
        marks.changed++;
        const k = `would ${m.verdict} by ${m.decidedBy}`;
        marks.by.set(k, (marks.by.get(k) ?? 0) + 1);
      }
      return m;
    };
    // a stream's header is printed before any flow: STAGED with --staged
    const streamHeader = [...HEADER, ...(judge ? ['STAGED'] : [])];
    const print = (flows: Flow[], withHeader: boolean) => {
      if (format === 'json')
        for (const f of flows) {
          const m = markOf(f);
          out(JSON.stringify(m ? { ...f, staged: m } : f));
        }
      else if (flows.length) {
        // a STAGED column with --staged, or when the datapath marked a flow of this batch
        const column = Boolean(judge) || flows.some((f) => f.staged);
        const rows = flows.map((f) => {
          const m = markOf(f);
          return column ? [...row(f), m ? stagedCell(m) : '='] : row(f);
        });
        out(table(withHeader ? [[...HEADER, ...(column ? ['STAGED'] : [])], ...rows] : rows));
      }
    };
    const summary = () => {
      if (judge && format === 'table')
        err(
          [
            `${marks.changed} of ${marks.judged} flow(s) judged would change under the staged set (${marks.datapath} marked by the nodes' datapath, which judges new flows by the staged tables; the rest judged by cascadectl against the policies)`,
            ...[...marks.by]
              .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
              .map(([k, n]) => `  ${n} ${k}`),
          ].join('\n'),
        );
    };
    if (values.agent) {
      const base = String(values.agent).replace(/\/$/, '');
      if (!/^https?:\/\//.test(base))
        throw new UsageError('--agent: an http(s) URL of an agent (its metrics port)');
      if (values.follow) query.set('follow', '1');
      const res = await fetch(`${base}/flows?${query}`);
      if (!res.ok || !res.body) throw new UsageError(`--agent ${base}: ${res.status} ${res.statusText}`);
      if (!values.follow) {
        print(parseFlows(await res.text()), true);
        summary();
        return 0;
      }
      out(format === 'table' ? streamHeader.join('  ') : '');
      let buf = '';
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buf += Buffer.from(chunk).toString('utf8');
        const lines = buf.split('\n');
        buf = lines.pop() ?? '';
        print(parseFlows(lines.join('\n')), false);
      }
      return 0;
    }
    // --staged without --node: every node's agent (the cluster's Nodes)
    const nodes = values.node
      ? [String(values.node)]
      : pair && liveOptions()
        ? [...pair.enforced.engine.nodes.keys()].sort()
        : [];
    if (!nodes.length) throw new UsageError('give --agent URL, or --node N with --kubeconfig/--context');
    if (values.follow && nodes.length > 1) throw new UsageError('--follow reads one node: give --node N');
    // The agent serves flows on its loopback only (they name every tenant's pods): they are read by
    // its own flows-read inside the container, through pods/exec (cluster admins), as cilium-dbg.
    if (format === 'table' && values.follow) out(streamHeader.join('  '));
    const collected: Flow[] = [];
    for (const node of nodes) {
      const agent = await onAgent('--node', node, 'the flows');
      await agent.run([...FLOWS_READ, query.toString(), ...(values.follow ? ['--follow'] : [])], (lines) => {
        const flows = parseFlows(lines.join('\n'));
        if (values.follow) print(flows, false);
        else collected.push(...flows);
      });
    }
    if (!values.follow) {
      collected.sort((a, b) => (a.time < b.time ? -1 : a.time > b.time ? 1 : 0));
      print(collected, true);
      summary();
    }
    return 0;
  },
};
