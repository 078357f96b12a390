// cascadectl: the offline CLI. It runs the same library code as the controllers on YAML files.
import { EFFECTIVE_SHORT_NAMES } from '@cascade/core';
import { type Command, err, out, parse, setTerminal, UsageError } from './cli.ts';
import { readCluster, setLiveOptions } from './cluster.ts';
import { cleanupCommand } from './commands/cleanup.ts';
import { completionCommand } from './commands/completion.ts';
import { diffCommand } from './commands/diff.ts';
import { doctorCommand } from './commands/doctor.ts';
import { effectiveCommand } from './commands/effective.ts';
import { explainCommand } from './commands/explain.ts';
import { flowsCommand } from './commands/flows.ts';
import { getEffectiveCommand } from './commands/get.ts';
import { graphCommand } from './commands/graph.ts';
import { lintCommand } from './commands/lint.ts';
import { manifestsCommand } from './commands/manifests.ts';
import { simulateCommand } from './commands/netpol.ts';
import { explainNetpolCommand } from './commands/netpol-explain.ts';
import { exposureCommand } from './commands/netpol-exposure.ts';
import { mapsCommand } from './commands/netpol-maps.ts';
import { promoteCommand } from './commands/netpol-promote.ts';
import { recommendCommand } from './commands/netpol-recommend.ts';
import { traceCommand } from './commands/netpol-trace.ts';
import { renderCommand } from './commands/render.ts';
import { reportCommand } from './commands/report.ts';
import { requestCommand } from './commands/request.ts';
import { statusCommand } from './commands/status.ts';
import { useClusterObjects } from './load.ts';
import { version } from './version.ts';

export const COMMANDS: Command[] = [
  effectiveCommand,
  statusCommand,
  explainCommand,
  simulateCommand,
  explainNetpolCommand,
  exposureCommand,
  mapsCommand,
  traceCommand,
  promoteCommand,
  recommendCommand,
  lintCommand,
  diffCommand,
  graphCommand,
  reportCommand,
  renderCommand,
  requestCommand,
  manifestsCommand,
  getEffectiveCommand,
  flowsCommand,
  cleanupCommand,
  doctorCommand,
];
COMMANDS.push(completionCommand(() => COMMANDS));

function usage(): string {
  return [
    'cascadectl: compute, explain and simulate Cascade policies from YAML files (no cluster needed)',
    '',
    'Commands:',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(16)} ${c.summary}`),
    '',
    "Run `cascadectl COMMAND -h` for a command's usage. Every command that reads objects reads them from",
    'FILES, or from a live cluster with --kubeconfig PATH and/or --context NAME (then FILES are added).',
    'Everywhere: -f FILE|DIR|- (repeatable), -R, --no-color (or NO_COLOR=1). On a terminal tables fit its',
    'width and verdicts are coloured; piped, output is plain ASCII and uncut.',
  ].join('\n');
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '-h' || name === '--help' || name === 'help') {
    out(usage());
    return name ? 0 : 2;
  }
  if (name === '--version' || name === 'version') {
    out(`cascadectl ${version()}`);
    return 0;
  }
  // a group alone (`cascadectl netpol`) lists its subcommands
  const group = COMMANDS.filter((c) => c.name.startsWith(`${name} `));
  if (group.length && (rest.length === 0 || rest[0] === '-h' || rest[0] === '--help')) {
    out(
      [`cascadectl ${name}: subcommands`, ...group.map((c) => `  ${c.name.padEnd(16)} ${c.summary}`)].join(
        '\n',
      ),
    );
    return rest.length ? 0 : 2;
  }
  // --kubeconfig / --context (anywhere): read the objects from a live cluster instead of files
  const live: { kubeconfig?: string; context?: string } = {};
  const plain: string[] = [];
  let noColor = process.env.NO_COLOR !== undefined && process.env.NO_COLOR !== '';
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i]!;
    if (a === '--no-color') {
      noColor = true;
      continue;
    }
    // kubectl habits: -f FILE|DIR|- (repeatable) is a FILES argument; folders are always read
    // recursively, so -R is accepted and changes nothing
    if (a === '-R' || a === '--recursive') continue;
    const f = /^(?:-f|--filename)(?:=(.*))?$/.exec(a);
    if (f) {
      const v = f[1] ?? rest[++i];
      if (v === undefined) {
        err('cascadectl: -f needs a file, a folder or - (standard input)');
        return 2;
      }
      plain.push(v);
      continue;
    }
    const m = /^--(kubeconfig|context)(?:=(.*))?$/.exec(a);
    if (!m) {
      plain.push(a);
      continue;
    }
    const v = m[2] ?? rest[++i];
    if (v === undefined || v === '') {
      err(`cascadectl: --${m[1]} needs a value`);
      return 2;
    }
    live[m[1] as 'kubeconfig' | 'context'] = v;
  }
  setTerminal({ tty: process.stdout.isTTY === true, noColor, width: process.stdout.columns });
  const isLive = live.kubeconfig !== undefined || live.context !== undefined;
  setLiveOptions(isLive ? live : undefined);
  // `get` and `cleanup` read what they need themselves; every other command reads the cluster's objects once
  if (isLive && name !== 'get' && name !== 'cleanup') {
    try {
      useClusterObjects(await readCluster(live));
    } catch (e) {
      err(`cascadectl: cannot read the cluster: ${(e as Error).message.split('\n')[0]}`);
      return 2;
    }
  } else useClusterObjects(undefined);
  return dispatch(name, plain);
}

/** `get effpol`, `get effectivepolicies`...: kubectl's names of the EffectivePolicy resource. */
const EFFECTIVE_NAMES = new Set([
  'effective',
  'effectivepolicy',
  'effectivepolicies',
  ...EFFECTIVE_SHORT_NAMES,
]);

async function dispatch(name: string, given: string[]): Promise<number> {
  const rest =
    name === 'get' && given[0] !== undefined && EFFECTIVE_NAMES.has(given[0].toLowerCase())
      ? ['effective', ...given.slice(1)]
      : given;
  let cmd = COMMANDS.find((c) => c.name === name);
  let args = rest;
  if (!cmd && rest.length > 0) {
    cmd = COMMANDS.find((c) => c.name === `${name} ${rest[0]}`);
    args = rest.slice(1);
  }
  if (!cmd) {
    err(`cascadectl: unknown command "${name}"\n\n${usage()}`);
    return 2;
  }
  try {
    const { values, positionals } = parse(cmd, args);
    if (values.help) {
      out(`usage: ${cmd.usage}\n\n${cmd.summary}`);
      return 0;
    }
    return await cmd.run(values, positionals);
  } catch (e) {
    if (e instanceof UsageError) {
      err(`cascadectl ${cmd.name}: ${e.message}\nusage: ${cmd.usage}`);
      return 2;
    }
    err(`cascadectl ${cmd.name}: internal error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    return 1;
  }
}

/** A closed pipe (`cascadectl ... | head`) ends the command quietly, not with an EPIPE trace. */
export function quietOnClosedPipe(): void {
  for (const s of [process.stdout, process.stderr])
    s.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
      throw e;
    });
}

if (import.meta.main) {
  quietOnClosedPipe();
  process.exitCode = await main(process.argv.slice(2));
}
