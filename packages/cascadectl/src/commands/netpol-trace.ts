// cascadectl netpol trace: a synthetic first packet run through a node's real BPF program on its
// live maps (BPF_PROG_TEST_RUN, by the agent image's debug command through pods/exec; nothing is
// sent), as Antrea's Traceflow traces one: the kernel's verdict where the packet leaves its source
// pod and where it reaches its destination pod, with the entry and rule that decide each.
import { onAgent } from '../agent-exec.ts';
import { type Command, oneOf, out, UsageError } from '../cli.ts';
import { loadNetpol } from './netpol.ts';
import { identityName, labelSetName } from './netpol-maps.ts';

const DEBUG = ['/usr/local/bin/node', '/app/packages/netpolicy/src/agent/debug.ts', 'trace'];

interface Hop {
  at: string;
  direction: string;
  kernel: string;
  reference: string;
  decided: string;
  entry?: string;
  rule?: string;
  remoteIdentity?: number;
}

export const traceCommand: Command = {
  name: 'netpol trace',
  summary:
    "a synthetic packet through a node's real BPF program on its live maps (nothing sent): the verdict and the deciding rule",
  usage:
    'cascadectl netpol trace --from NS/POD --to NS/POD|IP --port P [--proto tcp|udp] [--node N] --kubeconfig PATH [-o table|json]   (--node: default the node of --from, else of --to)',
  options: {
    from: { type: 'string' },
    to: { type: 'string' },
    port: { type: 'string' },
    proto: { type: 'string' },
    node: { type: 'string' },
    output: { type: 'string', short: 'o' },
  },
  async run(values, files) {
    const format = oneOf('output', values.output, ['table', 'json'], 'table');
    const proto = oneOf('proto', values.proto, ['tcp', 'udp'], 'tcp');
    if (!values.from || !values.to || !values.port)
      throw new UsageError('give --from NS/POD, --to NS/POD|IP and --port P');
    const port = Number(values.port);
    if (!Number.isInteger(port) || port < 1 || port > 65535)
      throw new UsageError(`--port ${String(values.port)}: a port from 1 to 65535`);
    const { engine } = loadNetpol(files);
    const pod = (flag: string, v: string) => {
      const p = engine.pods.get(v);
      if (p) {
        if (!p.ips[0]) throw new UsageError(`--${flag} ${v}: the pod has no address yet`);
        return { ip: p.ips[0], node: p.node };
      }
      if (v.includes('/')) throw new UsageError(`--${flag} ${v}: no such pod in the cluster's objects`);
      if (!/^[0-9a-fA-F.:]{2,45}$/.test(v))
        throw new UsageError(`--${flag} ${v}: a pod (NS/POD) or an IP address`);
      return { ip: v, node: undefined };
    };
    const from = pod('from', String(values.from));
    if (!String(values.from).includes('/')) throw new UsageError('--from: a pod (NS/POD)');
    const to = pod('to', String(values.to));
    const node = String(values.node ?? from.node ?? to.node ?? '');
    if (!node) throw new UsageError('--node: neither pod says which node it runs on');
    type Trace = { packet: string; verdict: string; hops: Hop[]; note?: string; rules?: string };
    const traceOn = async (n: string): Promise<Trace & { where: string }> => {
      const agent = await onAgent('--node', n, 'a trace');
      let text = '';
      await agent.run([...DEBUG, from.ip, to.ip, proto, String(port)], (lines) => {
        if (text.length < 1 << 20) text += `${lines.join('\n')}\n`;
      });
      try {
        return { ...(JSON.parse(text) as Trace), where: agent.where };
      } catch {
        throw new UsageError(
          `--node ${n}: the agent ${agent.where} printed no trace (${text.slice(0, 160)})`,
        );
      }
    };
    const first = await traceOn(node);
    let r: Trace = first;
    // pods on two nodes: the source's node judges the packet leaving, the destination's node (its
    // own program, its own maps) judges it arriving, as the packet would cross them
    const other = !values.node && from.node && to.node && to.node !== from.node ? to.node : undefined;
    const nodes = [node];
    let where = first.where;
    if (other && first.verdict === 'allow') {
      const second = await traceOn(other);
      nodes.push(other);
      where = `${first.where}, ${second.where}`;
      const { note: _n, ...firstRest } = first;
      r = {
        ...firstRest,
        hops: [...first.hops, ...second.hops],
        verdict: [...first.hops, ...second.hops].every((h) => h.kernel === 'allow') ? 'allow' : 'deny',
        ...(first.rules || second.rules
          ? { rules: [first.rules, second.rules].filter(Boolean).join('\n  ') }
          : {}),
      };
    }
    const agent = { where };
    // the entry's identity is the node's own number (each agent numbers its label sets itself; the
    // model's numbers in explain and maps differ): named here by the peer's label set, as elsewhere
    const peerOf = (h: Hop) => (h.direction === 'egress' ? String(values.to) : String(values.from));
    const named = (h: Hop): Hop => {
      const m = h.entry ? /identity (\d+)/.exec(h.entry) : null;
      if (!m || !h.entry) return h;
      const id = Number(m[1]);
      // only the fixed identities (any, all-pods, host, world) mean the same in every numbering
      const fixed = identityName(engine, id);
      const p = engine.pods.get(peerOf(h));
      const name = ['any', 'all-pods', 'host', 'world'].includes(fixed)
        ? fixed
        : id === h.remoteIdentity
          ? p
            ? labelSetName(p.namespace, p.labels)
            : `that of ${peerOf(h)}`
          : undefined;
      return {
        ...h,
        entry: h.entry.replace(
          m[0],
          name ? `identity ${name} (#${id} on this node)` : `identity #${id} on this node`,
        ),
      };
    };
    r = { ...r, hops: r.hops.map(named) };
    if (format === 'json') out(JSON.stringify({ node, nodes, agent: agent.where, ...r }, null, 2));
    else
      out(
        [
          `${r.packet} on node ${nodes.join(' then ')} (agent ${agent.where}): ${r.verdict.toUpperCase()}`,
          ...r.hops.map(
            (h) =>
              `  ${h.at} (${h.direction}): kernel ${h.kernel.toUpperCase()}${h.reference !== h.kernel ? ` (the reference datapath says ${h.reference}: report this)` : ''}; decided by ${h.decided}${h.entry ? `, entry ${h.entry}` : ''}${h.rule ? `, rule ${h.rule}` : ''}`,
          ),
          ...(r.note ? [`  ${r.note}`] : []),
          ...(r.rules ? [`  ${r.rules}`] : []),
        ].join('\n'),
      );
    return r.verdict === 'allow' ? 0 : 1;
  },
};
