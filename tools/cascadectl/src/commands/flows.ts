// cascadectl flows: the flows a node's agent saw its BPF program deny (and allow, for audited
// endpoints), with the deciding policy and rule, like `hubble observe`. From an agent's endpoint
// (`--agent http://HOST:9090`, e.g. through a port-forward), or from the agent on `--node N` through
// the API server's pods/exec (with --kubeconfig / --context): the agent serves flows on its loopback
// only, and its own flows-read copies them out.
import { Writable } from 'node:stream';
import { errorText } from '@cascade/core';
import { Exec, type KubeConfig } from '@kubernetes/client-node';
import { type Command, oneOf, out, table, UsageError } from '../cli.ts';
import { clientFor, liveOptions } from '../cluster.ts';

/** The label the chart gives the agent's pods (charts/cascade/templates/agent.yaml). */
const AGENT_LABEL = 'app.kubernetes.io/name=netpolicy-agent';

/** The agent image's node and the reader of its flow stream (packages/netpolicy/src/agent/flows-read.ts). */
const FLOWS_READ = ['/usr/local/bin/node', '/app/packages/netpolicy/src/agent/flows-read.ts'];

/**
 * Runs COMMAND in the agent container through pods/exec and hands its standard output over line by
 * line; resolves when it ends with success, rejects with its standard error (or status) otherwise.
 */
async function execLines(
  kc: KubeConfig,
  pod: { name: string; namespace: string },
  command: string[],
  onLines: (lines: string[]) => void,
): Promise<void> {
  let buf = '';
  let err = '';
  const stdout = new Writable({
    write(chunk, _enc, done) {
      buf += String(chunk);
      const lines = buf.split('\n');
      buf = lines.pop() ?? '';
      if (lines.length) onLines(lines);
      done();
    },
  });
  const stderr = new Writable({
    write(chunk, _enc, done) {
      if (err.length < 4096) err += String(chunk);
      done();
    },
  });
  await new Promise<void>((resolve, reject) => {
    let status: { status?: string; message?: string } | undefined;
    const finish = () => {
      if (buf.trim()) onLines([buf]);
      buf = '';
      if (status?.status === 'Success') resolve();
      else reject(new Error(err.trim() || status?.message || 'the exec stream ended without a status'));
    };
    new Exec(kc)
      .exec(pod.namespace, pod.name, 'agent', command, stdout, stderr, null, false, (s) => {
        status = s;
      })
      .then((ws) => ws.on('close', finish), reject);
  });
}

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
}

const row = (f: Flow) => [
  f.time.replace('T', ' ').replace(/\.\d+Z$/, 'Z'),
  f.node,
  f.from,
  f.to,
  `${f.protocol}/${f.port}`,
  f.verdict.toUpperCase(),
  f.rule ?? '-',
];
const HEADER = ['TIME', 'NODE', 'FROM', 'TO', 'PROTO/PORT', 'VERDICT', 'RULE'];

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
    const live = liveOptions();
    if (!live)
      throw new UsageError(
        '--node reads through the API server: give --kubeconfig PATH and/or --context NAME',
      );
    const client = clientFor(live);
    const pods = await client.request<{
      items: { metadata: { name: string; namespace: string }; status?: { phase?: string } }[];
    }>(
      'GET',
      `/api/v1/pods?labelSelector=${encodeURIComponent(AGENT_LABEL)}&fieldSelector=${encodeURIComponent(`spec.nodeName=${values.node}`)}`,
    );
    const agent = pods.items.find((p) => p.status?.phase === 'Running') ?? pods.items[0];
    if (!agent) throw new UsageError(`no netpolicy-agent pod (label ${AGENT_LABEL}) on node ${values.node}`);
    // The agent serves flows on its loopback only (they name every tenant's pods): they are read by
    // its own flows-read inside the container, through pods/exec (cluster admins), as cilium-dbg.
    if (format === 'table' && values.follow) out(HEADER.join('  '));
    const collected: Flow[] = [];
    const where = `${agent.metadata.namespace}/${agent.metadata.name}`;
    await execLines(
      client.kc,
      agent.metadata,
      [...FLOWS_READ, query.toString(), ...(values.follow ? ['--follow'] : [])],
      (lines) => {
        const flows = parse(lines.join('\n'));
        if (values.follow) print(flows, false);
        else collected.push(...flows);
      },
    ).catch((e: unknown) => {
      // one line, not a trace: who may exec, and what the API server or the agent said
      const msg = errorText(e).split('\n')[0]!.slice(0, 300);
      throw new UsageError(
        `--node ${values.node}: cannot read the flows of the agent ${where} through pods/exec: ${msg}${/\b403\b|forbidden/i.test(msg) ? ` (it needs create pods/exec in ${agent.metadata.namespace})` : ''}`,
      );
    });
    if (!values.follow) print(collected, true);
    return 0;
  },
};
