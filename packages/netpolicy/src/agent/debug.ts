// cascade-dbg: the agent image's debug command, as cilium-dbg is Cilium's. Reads the node's live
// datapath (the maps and programs pinned under --pin-dir) without loading or writing anything, and
// prints JSON: what the kernel enforces, not what the API objects say.
//   kubectl exec -n cascade-system <agent pod> -c agent -- \
//     node /app/packages/netpolicy/src/agent/debug.ts summary
// (the image has no shell to wrap it in; `cascadectl netpol maps --node N` runs it this way).
import { ARTIFACTS, COUNTERS, LiveMaps } from '@cascade/bpf-datapath';
import { type TraceArgs, trace, traceArgs } from './trace.ts';

const USAGE = `Usage: cascade-dbg [--pin-dir DIR] COMMAND

Commands (JSON on standard output):
  summary     counts of endpoints, host addresses, policy entries, conntrack entries and Services,
              and every verdict counter
  endpoints   the node's endpoints: address, identity, interface, revision, flags, tables
  hosts       every host address the node knows (pods of every node, the nodes) and its identity
  ct [N]      conntrack: the total and the first N entries (default 1000)
  services    Service frontends and their backends
  counters    the verdict counters, summed over the CPUs
  state       endpoints, hosts, Services, the policy entry count and the counters at once (what
              \`cascadectl netpol maps --node N\` compares with the model)
  trace SRC DST tcp|udp PORT
              a synthetic first packet from SRC to DST:PORT run through this node's real program on
              its live maps (BPF_PROG_TEST_RUN; nothing is sent): at SRC's interface if SRC is a pod
              of this node, then at DST's if DST is; the kernel's verdict at each, and the entry and
              rule that decide it. Its conntrack entries are removed; it is counted like any packet,
              and a denial is reported in the flows like any (source port 65000-65499)

--pin-dir DIR   bpffs directory of the pinned maps ($CASCADE_PIN_DIR, /sys/fs/bpf/cascade)
`;

export async function debugCommand(
  argv: string[],
  env = process.env,
): Promise<{ code: number; out: string }> {
  const args = [...argv];
  let pinDir = env.CASCADE_PIN_DIR ?? '/sys/fs/bpf/cascade';
  const i = args.indexOf('--pin-dir');
  if (i >= 0) {
    const v = args[i + 1];
    if (!v) return { code: 2, out: '--pin-dir needs a directory' };
    pinDir = v;
    args.splice(i, 2);
  }
  const [cmd, arg] = args;
  if (!cmd || cmd === '-h' || cmd === '--help') return { code: cmd ? 0 : 2, out: USAGE };
  const commands = ['summary', 'endpoints', 'hosts', 'ct', 'services', 'counters', 'state', 'trace'];
  if (!commands.includes(cmd)) return { code: 2, out: `unknown command "${cmd.slice(0, 40)}"\n\n${USAGE}` };
  let traced: TraceArgs | undefined;
  if (cmd === 'trace') {
    const t = traceArgs(args.slice(1));
    if ('error' in t) return { code: 2, out: `trace: ${t.error}` };
    traced = t;
  }
  const limit = arg === undefined || cmd !== 'ct' ? 1000 : Number(arg);
  if (!Number.isInteger(limit) || limit < 0 || limit > 1_000_000)
    return { code: 2, out: `ct: "${String(arg).slice(0, 20)}" is not a count from 0 to 1000000` };
  let live: LiveMaps;
  try {
    live = await LiveMaps.open(ARTIFACTS.bpfctl, pinDir);
  } catch (e) {
    return {
      code: 1,
      out: `cannot open the datapath pinned under ${pinDir}: ${(e as Error).message.split('\n')[0]}`,
    };
  }
  try {
    let value: unknown;
    if (traced) value = await trace(live, traced, env);
    else if (cmd === 'endpoints') value = await live.endpoints();
    else if (cmd === 'hosts') value = await live.hosts();
    else if (cmd === 'ct') value = await live.conntrack(limit);
    else if (cmd === 'services') value = await live.services();
    else if (cmd === 'counters') value = await live.counters();
    else if (cmd === 'state')
      value = {
        endpoints: await live.endpoints(),
        hosts: await live.hosts(),
        services: await live.services(),
        policyEntries: await live.policyEntries(),
        counters: await live.counters(),
      };
    else
      value = {
        pinDir,
        endpoints: (await live.endpoints()).length,
        hosts: (await live.hosts()).length,
        policyEntries: await live.policyEntries(),
        conntrackEntries: (await live.conntrack(0)).total,
        services: (await live.services()).length,
        counters: await live.counters(),
        counterNames: Object.keys(COUNTERS),
      };
    return { code: 0, out: JSON.stringify(value, null, 2) };
  } catch (e) {
    return { code: 1, out: `${cmd}: ${(e as Error).message.split('\n')[0]}` };
  } finally {
    await live.close();
  }
}

if (import.meta.main) {
  const r = await debugCommand(process.argv.slice(2));
  (r.code === 0 ? process.stdout : process.stderr).write(`${r.out}\n`);
  process.exitCode = r.code;
}
