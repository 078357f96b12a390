// flows-read: copies the agent's flow stream (GET /flows on its loopback) to standard output. It runs
// inside the agent's container, started through the API server's pods/exec (`cascadectl flows --node`,
// or `kubectl exec ds/netpolicy-agent -- node .../flows-read.ts`), as `cilium-dbg monitor` is. The
// agent serves flows on loopback only because they name pods of every tenant; exec is authorized by
// the API server (create pods/exec in the agent's namespace: cluster admins), and the pod proxy could
// not reach a loopback listener anyway.
//
//   node flows-read.ts [QUERY] [--follow] [--address HOST:PORT]
//
// QUERY is the URL query of /flows (verdict=deny&namespace=NS). Exit 0 when the stream ends, 1 when
// the agent cannot be read, 2 on bad arguments.

/** The agent's --metrics-bind-address default: $CASCADE_METRICS_BIND_ADDRESS, else 127.0.0.1:$METRICS_PORT. */
export const agentMetricsBindAddress = (env: NodeJS.ProcessEnv = process.env) =>
  env.CASCADE_METRICS_BIND_ADDRESS || `127.0.0.1:${env.METRICS_PORT ?? 9090}`;

/** Where the flows are read inside the agent's container: its loopback, on the port it listens on. */
export const agentFlowsAddress = (env: NodeJS.ProcessEnv = process.env) =>
  `127.0.0.1:${agentMetricsBindAddress(env).split(':').pop()}`;

/** The arguments, checked: the query is a URL query of plain words, the address a loopback host:port. */
export function flowsReadArgs(
  argv: readonly string[],
): { query: string; follow: boolean; address: string } | { error: string } {
  let query = '';
  let follow = false;
  let address = agentFlowsAddress();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--follow') follow = true;
    else if (a === '--address') address = argv[++i] ?? '';
    else if (a.startsWith('--')) return { error: `unknown flag ${a.slice(0, 40)}` };
    else query = a;
  }
  if (query.length > 512 || !/^[A-Za-z0-9=&%+._-]*$/.test(query))
    return { error: 'the query is a URL query of letters, digits, =, &, %, +, ., _ and - (at most 512)' };
  if (!/^(127\.0\.0\.1|localhost|\[::1\]):\d{1,5}$/.test(address))
    return { error: '--address: a loopback HOST:PORT (127.0.0.1, localhost or [::1])' };
  const q = new URLSearchParams(query);
  if (follow) q.set('follow', '1');
  return { query: q.toString(), follow, address };
}

async function main(): Promise<number> {
  const args = flowsReadArgs(process.argv.slice(2));
  if ('error' in args) {
    process.stderr.write(`flows-read: ${args.error}\n`);
    return 2;
  }
  const url = `http://${args.address}/flows${args.query ? `?${args.query}` : ''}`;
  let res: Response;
  try {
    res = await fetch(url);
  } catch (e) {
    process.stderr.write(`flows-read: cannot reach the agent at ${args.address}: ${(e as Error).message}\n`);
    return 1;
  }
  if (!res.ok || !res.body) {
    process.stderr.write(
      `flows-read: the agent at ${args.address} answered ${res.status} ${res.statusText}\n`,
    );
    return 1;
  }
  // a reader that went away (exec closed) ends the copy quietly
  process.stdout.on('error', () => process.exit(0));
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>)
    if (!process.stdout.write(chunk)) await new Promise((r) => process.stdout.once('drain', r));
  return 0;
}

if (import.meta.main) process.exitCode = await main();
