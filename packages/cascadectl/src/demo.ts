// `npm run demo`: the main job on the bundled examples, readably, with no cluster.
import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { table } from './cli.ts';
import { loadGatewayWorld } from './commands/gateway-common.ts';
import { loadNetpol, readProbes, simulateProbe, truthTable } from './commands/netpol.ts';
import { renderedObjects } from './commands/render.ts';
import { gatewayWirings } from './commands/wiring.ts';
import { kernelProbes } from './kernel-demo.ts';
import { main } from './main.ts';
import { checkoutRequest, tokenRequest } from './walkthrough.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const examples = join(root, 'examples');
const section = (title: string) =>
  process.stdout.write(`\n${'='.repeat(100)}\n== ${title}\n${'='.repeat(100)}\n`);

export async function demo(): Promise<number> {
  const t0 = Date.now();
  let worst = 0;
  const run = async (title: string, argv: string[]) => {
    section(`${title}   ($ cascadectl ${argv.map((a) => a.replace(`${root}/`, '')).join(' ')})`);
    worst = Math.max(worst, await main(argv));
  };
  const gw = join(examples, 'gateway');
  const np = join(examples, 'netpol');
  const probesFile = join(examples, 'probes', 'netpol.yaml');
  await run('Effective auth and rate-limit policies, per path', ['effective', gw]);
  await run('Policy status and <Kind>Affected conditions', ['status', gw]);
  await run('Why team-b/orders gets its limits', [
    'explain',
    gw,
    '--route',
    'team-b/orders',
    '--kind',
    'RateLimitPolicy',
  ]);
  section('Downstream configuration the controllers publish   ($ cascadectl render examples/gateway)');
  {
    const { world } = loadGatewayWorld([gw], undefined);
    const objects = renderedObjects(world);
    const rows = [['KIND', 'NAMESPACE/NAME', 'WHAT']];
    for (const o of objects) {
      const spec = o.spec as { hosts?: string[] } | undefined;
      const what =
        o.kind === 'AuthConfig'
          ? `hosts ${spec?.hosts?.join(', ')}; from ${o.metadata.annotations?.['cascade.dev/sources']}`
          : `Limitador limits for gateway ${o.metadata.namespace}/${o.metadata.labels?.['cascade.dev/gateway']}`;
      rows.push([o.kind, `${o.metadata.namespace}/${o.metadata.name}`, what]);
    }
    process.stdout.write(`${table(rows)}\n\n`);
    const cm = objects.find((o) => o.kind === 'ConfigMap') as { data?: Record<string, string> } | undefined;
    if (cm?.data) process.stdout.write(`limits.yaml:\n${cm.data['limits.yaml']}`);
    // what the gateway's proxy is told: the wasm-shim configuration inside its provider's objects
    for (const w of gatewayWirings(world)) {
      process.stdout.write(
        `\nwasm-shim configuration of gateway ${w.gateway} (${w.provider ?? 'no known provider'}: ${w.objects.map((o) => `${o.kind} ${o.metadata.name}`).join(', ') || 'no object'}), in the order wasm-shim tries the action sets:\n`,
      );
      const sets = [['#', 'HOSTNAME', 'MATCH', 'ACTIONS']];
      w.wiring.config.actionSets.forEach((set, i) => {
        sets.push([
          String(i + 1),
          set.routeRuleConditions.hostnames.join(','),
          (set.routeRuleConditions.predicates ?? ['(any)']).join(' && '),
          set.actions
            .map((a) => `${a.service}(${a.scope.length > 24 ? `${a.scope.slice(0, 21)}...` : a.scope})`)
            .join(' -> '),
        ]);
      });
      process.stdout.write(`${table(sets)}\n`);
    }
  }
  await run("What the gateway does with team-b's checkout POST", checkoutRequest(gw));
  await run(
    'Token limits: a streamed completion on the AI gateway, counted in tokens',
    tokenRequest(join(examples, 'ai-gateway'), join(examples, 'llm-responses', 'stream.sse')),
  );
  await run('Lint warnings', ['lint', gw, np]);
  await run('Network policy: the example flows', ['netpol', 'simulate', np, '--probes', probesFile]);

  section('Network policy truth table (every pod pair, TCP/7443 and TCP/8080)');
  const { engine } = loadNetpol([np]);
  for (const t of truthTable(engine).filter((x) => x.port === 'TCP/7443' || x.port === 'TCP/8080')) {
    process.stdout.write(
      `${t.port}   (. allow, X deny; rows: from, columns: to)\n${table(t.rows, '  ')}\n\n`,
    );
  }
  await run('Why prometheus may scrape the ledger', [
    'netpol',
    'explain',
    np,
    '--from',
    'monitoring/prometheus',
    '--to',
    'payments/ledger',
    '--port',
    '9090',
  ]);

  section('BPF maps (lowered MapState, shared layers)');
  let entries = 0;
  const rows = [['TABLE', 'LAYER', 'DIRECTION', 'ENTRIES', 'ENDPOINT IDENTITIES']];
  for (const t of engine.tables.values()) {
    entries += t.state.size;
    rows.push([t.id, t.layer, t.direction, String(t.state.size), String(t.subjects.size)]);
  }
  process.stdout.write(
    `${engine.pods.size} endpoints, ${engine.identities.size} identities, ${engine.tables.size} tables, ${entries} entries\n${table(rows)}\n`,
  );
  process.stdout.write('(per endpoint: cascadectl netpol maps examples/netpol --endpoint shop/cart)\n');

  section('The example flows through the real BPF program (BPF_PROG_TEST_RUN)');
  const probes = readProbes(probesFile).map((p) =>
    simulateProbe(engine, p.from, p.to, p.proto, Number(p.port)),
  );
  const addr = (x: string) => engine.pods.get(x)?.ips[0] ?? x;
  process.stdout.write(`${await kernelProbes(engine, probes, addr)}\n`);

  section('Pictures');
  mkdirSync(join(root, 'out'), { recursive: true });
  worst = Math.max(
    worst,
    await main(['graph', gw, '-o', join(root, 'out', 'gateway.svg')]),
    await main(['graph', np, '-o', join(root, 'out', 'netpol.svg')]),
    await main(['report', gw, np, '-o', join(root, 'out', 'report')]),
  );
  process.stdout.write(
    'open out/gateway.svg, out/netpol.svg and out/report/index.html (everything in one page, with search) in a browser\n',
  );

  process.stdout.write(`\ndemo finished in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
  return worst;
}

if (import.meta.main) process.exitCode = await demo();
