// npm run conformance [-- [--subset] [SUITE...]]: the upstream network-policy test suites against
// Cascade on the real single-node cluster (tools/cluster), nobody here having written them:
//   netpol      the Kubernetes NetworkPolicy e2e tests (k8s.io/kubernetes test/e2e/network/netpol)
//   npapi-v0.1  network-policy-api conformance: AdminNetworkPolicy, BaselineAdminNetworkPolicy
//   npapi-v0.2  network-policy-api conformance: ClusterNetworkPolicy
// Built from their Go modules (build/build.sh), with their agnhost workload image built here too. A
// full run writes conformance/results/<suite>.json (version, date, passed, failed, each skip with its
// reason, each test's time, a failure's message); `--subset` runs a representative few (npm test) and
// writes to tools/conformance/.local instead.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const ROOT = resolve(import.meta.dirname, '../../..');
const CLUSTER_SH = join(ROOT, 'tools/cluster/cluster.sh');
const KUBECONFIG = '/var/lib/cascade-cluster/admin.kubeconfig';
const NODE = join(ROOT, 'node_modules/.bin/node');

export type SuiteName = 'netpol' | 'npapi-v0.1' | 'npapi-v0.2';
export const SUITES: SuiteName[] = ['netpol', 'npapi-v0.1', 'npapi-v0.2'];

export interface TestResult {
  name: string;
  result: 'passed' | 'failed' | 'skipped';
  seconds: number;
  /** a skip's reason, or a failure's message (first lines) */
  reason?: string;
  /** a failure caused by this machine, not by Cascade (what shows it) */
  environment?: string;
}

export interface SuiteResults {
  suite: SuiteName;
  title: string;
  /** the Go module and version the tests come from */
  module: string;
  version: string;
  kubernetes: string;
  cascadeCommit: string;
  date: string;
  subset: boolean;
  /** the cluster's node count (results of 2 or more are written to SUITE.N-nodes.json) */
  nodes: number;
  /** what Cascade declares it supports (network-policy-api features), passed to the suite */
  features?: string[];
  /** features Cascade implements that this cluster cannot show (see the skips' reasons) */
  notShownHere?: string[];
  command: string[];
  passed: number;
  /** failures of Cascade (any verdict the suite did not expect) */
  failed: number;
  /** failures caused by this machine (SCTP probes the kernel refuses), each shown in its test */
  failedByEnvironment: number;
  skipped: number;
  seconds: number;
  /** changes made to the suite to run it on this machine, and why */
  adaptations: string[];
  tests: TestResult[];
}

const NO_SCTP =
  "this machine's kernel has no SCTP (socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP) fails with EPROTONOSUPPORT): no probe can open an SCTP connection here. Cascade's datapath judges SCTP like TCP and UDP (bpf-datapath kernel tests, port ranges included)";

const ONE_NODE =
  "needs a second node: the suite's server for node peers is a host-network StatefulSet of two replicas binding the same ports (centaur-1 is dialled), which one node cannot run. Cascade implements node peers (AdminNetworkPolicy/BaselineAdminNetworkPolicy/ClusterNetworkPolicy `nodes` egress peers: @cascade/netpolicy scenario and kernel tests), but this single-node cluster cannot show it against the suite";

const NPAPI_ONE_NODE =
  "the cluster here has one node: build.sh takes the suite's host-network StatefulSet `centaur` (two replicas binding the same ports; the node-peer tests' server, used by no other test) out of the base manifests and out of the set-up's readiness wait, and the node-peer tests are not run";

const NPAPI_ADAPTATION =
  "the suite's base workloads start SCTP servers (agnhost porter, SERVE_SCTP_PORT_9003/9005) that exit when the kernel cannot listen on SCTP, which would keep every base pod un-Ready; build.sh renames those two variables (the containers keep running, serving nothing) and the SCTP tests are skipped";

interface SuiteDef {
  title: string;
  module: string;
  version: string;
  binary: string;
  features?: string[];
  /** features Cascade implements that cannot be shown on this cluster (not passed to the suite) */
  notShownHere?: string[];
  args: (bin: string, report: string, subset: boolean, def: SuiteDef) => string[];
  /** tests not run on this machine, matched by name, and why */
  skips: [RegExp, string][];
  adaptations: string[];
  parse: (report: string, output: string) => TestResult[];
}

// npm test's subset: four tests, each for a corner the engine's own tests cannot show against the
// upstream harness: a named port resolved on real pods, ipBlock except, ingress and egress in one
// policy, and UDP. Each costs about a minute here (three namespaces of nine pods set up and torn
// down); the full suite (npm run conformance) runs all of them.
const NETPOL_SUBSET = [
  'should allow egress access on one named port',
  'should enforce except clause while egress access to server in CIDR block',
  'should work with Ingress, Egress specified together',
  "using UDP should support a 'default-deny-ingress' policy",
];

const npapi = (
  version: string,
  binary: string,
  features: string[],
  notShownHere: string[],
  subset: string[],
): SuiteDef => ({
  title: `network-policy-api conformance ${version}`,
  module: 'sigs.k8s.io/network-policy-api',
  version,
  binary,
  features,
  notShownHere,
  args: (bin, _report, sub, d) => [
    join(bin, binary),
    '-test.v',
    '-test.timeout=90m',
    `-test.run=^TestConformance$${sub ? `/^(${subset.join('|')})$` : ''}`,
    '-test.skip=^TestConformance$/SCTP',
    `-supported-features=${(d.features ?? features).join(',')}`,
    '-cleanup-base-resources=true',
  ],
  skips: [
    [/SCTP/, NO_SCTP],
    [/NodePeers/, ONE_NODE],
  ],
  adaptations: [NPAPI_ADAPTATION, NPAPI_ONE_NODE],
  parse: (_report, output) => parseGoTest(output),
});

export const DEFS: Record<SuiteName, SuiteDef> = {
  netpol: {
    title: 'Kubernetes NetworkPolicy e2e (test/e2e/network/netpol)',
    module: 'k8s.io/kubernetes',
    version: 'v1.34.4',
    binary: 'netpol.test',
    args: (bin, report, subset) => [
      join(bin, 'netpol.test'),
      `--kubeconfig=${KUBECONFIG}`,
      '--provider=local',
      '--ginkgo.skip=SCTPConnectivity',
      ...(subset ? [`--ginkgo.focus=${NETPOL_SUBSET.map(escapeRegex).join('|')}`] : []),
      `--ginkgo.json-report=${report}`,
      '--ginkgo.no-color',
      '--ginkgo.timeout=90m',
    ],
    skips: [[/SCTPConnectivity/, NO_SCTP]],
    adaptations: [],
    parse: (report) => parseGinkgo(readFileSync(report, 'utf8')),
  },
  'npapi-v0.1': npapi(
    'v0.1.7',
    'npapi-v0.1.test',
    [
      'AdminNetworkPolicy',
      'BaselineAdminNetworkPolicy',
      'AdminNetworkPolicyNamedPorts',
      'BaselineAdminNetworkPolicyNamedPorts',
    ],
    ['AdminNetworkPolicyEgressNodePeers', 'BaselineAdminNetworkPolicyEgressNodePeers'],
    ['AdminNetworkPolicyIngressTCP', 'BaselineAdminNetworkPolicyEgressNamedPort'],
  ),
  'npapi-v0.2': npapi(
    'v0.2.0',
    'npapi-v0.2.test',
    ['ClusterNetworkPolicy', 'ClusterNetworkPolicyNamedPorts'],
    ['ClusterNetworkPolicyEgressNodePeers'],
    ['CNPAdminTierIngressTCP', 'CNPBaselineTierEgressUDP'],
  ),
};

/**
 * A suite as it runs on `nodes` nodes: on two or more, the network-policy-api suites run unchanged
 * (but for SCTP), node-peer tests and their two-replica host-network fixture included.
 */
export function defFor(name: SuiteName, nodes: number): SuiteDef {
  const def = DEFS[name];
  if (nodes < 2 || name === 'netpol') return def;
  return {
    ...def,
    features: [...(def.features ?? []), ...(def.notShownHere ?? [])],
    notShownHere: [],
    skips: def.skips.filter(([, why]) => why !== ONE_NODE),
    adaptations: def.adaptations.filter((a) => a !== NPAPI_ONE_NODE),
  };
}

const escapeRegex = (s: string) => s.replace(/[.*+?^${}()|[\]\\']/g, (c) => (c === "'" ? '.' : `\\${c}`));

/** Ginkgo's JSON report -> one result per spec (It); a failure in a suite-level node counts too. */
export function parseGinkgo(json: string): TestResult[] {
  type Spec = {
    ContainerHierarchyTexts?: string[] | null;
    LeafNodeText?: string;
    LeafNodeType?: string;
    State?: string;
    RunTime?: number;
    Failure?: { Message?: string };
  };
  const suites = JSON.parse(json) as { SpecReports?: Spec[] | null }[];
  const out: TestResult[] = [];
  for (const s of suites)
    for (const r of s.SpecReports ?? []) {
      const isSpec = r.LeafNodeType === 'It';
      const failed = r.State !== 'passed' && r.State !== 'skipped' && r.State !== 'pending';
      if (!isSpec && !failed) continue;
      const name = [...(r.ContainerHierarchyTexts ?? []), r.LeafNodeText ?? r.LeafNodeType ?? '?']
        .filter(Boolean)
        .join(' ');
      out.push({
        name,
        result: failed ? 'failed' : r.State === 'passed' ? 'passed' : 'skipped',
        seconds: Math.round((r.RunTime ?? 0) / 1e7) / 100,
        ...(failed && r.Failure?.Message ? { reason: firstLines(r.Failure.Message) } : {}),
      });
    }
  return out;
}

/**
 * `go test -v` output -> one result per conformance test (TestConformance/NAME). A skip carries the
 * line after it; a failure the probes that failed, from the test's log (streamed before the verdict
 * lines), and is marked `environment` when every failed probe is SCTP refused by the kernel ("protocol
 * not supported": no SCTP on this machine), not a verdict of the datapath.
 */
export function parseGoTest(output: string): TestResult[] {
  const lines = output.split('\n');
  const logs = new Map<string, string[]>();
  let current: string | undefined;
  for (const line of lines) {
    const run = /^=== (?:RUN|CONT|NAME)\s+TestConformance(?:\/([^/\s]+))?/.exec(line);
    if (run) {
      // `=== NAME  TestConformance`: the parent's own log (a late line of an earlier test's poll, say),
      // which belongs to no test; a test's lines follow its own name again
      current = run[1];
      if (current && !logs.has(current)) logs.set(current, []);
      continue;
    }
    if (/^--- /.test(line))
      current = undefined; // the verdicts follow
    else if (current) logs.get(current)!.push(line.trim());
  }
  const out: TestResult[] = [];
  lines.forEach((line, i) => {
    const m = /^\s*--- (PASS|FAIL|SKIP): TestConformance\/([^/\s]+) \(([\d.]+)s\)/.exec(line);
    if (!m) return;
    const name = m[2]!;
    const result = m[1] === 'PASS' ? 'passed' : m[1] === 'FAIL' ? 'failed' : 'skipped';
    const t: TestResult = { name, result, seconds: Number(m[3]) };
    if (result === 'skipped') {
      const next = lines[i + 1]?.trim();
      if (next && !next.startsWith('---')) t.reason = next;
    } else if (result === 'failed') {
      const log = logs.get(name) ?? [];
      const failedProbes = log.filter((l) => /FAILED Command was/.test(l));
      const why = log.filter((l) => /FAILED Command was|Expected connection|Error:|error /.test(l));
      t.reason = firstLines((why.length ? why : log.slice(-12)).join('\n'));
      if (
        failedProbes.length > 0 &&
        failedProbes.every((l) => l.includes('--protocol=sctp')) &&
        log.some((l) => l.includes('protocol not supported'))
      )
        t.environment = `every failed probe is SCTP (${failedProbes.length}), refused by this kernel ("protocol not supported"): no SCTP here; its TCP and UDP probes passed`;
    }
    out.push(t);
  });
  return out;
}

const firstLines = (s: string) => s.split('\n').slice(0, 12).join('\n').slice(0, 2000);

function sh(cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}) {
  return execFileSync(cmd, args, {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    env: opts.env ?? process.env,
    timeout: opts.timeoutMs ?? 30 * 60_000,
    maxBuffer: 256 << 20,
  });
}

/** The suites' binaries (built once, cached) and their workload image in the cluster's containerd. */
export function prepare(log: (s: string) => void = () => {}, nodes = 1): string {
  const bin = sh('bash', [join(ROOT, 'tools/conformance/build/build.sh')], {
    env: { ...process.env, CONFORMANCE_NODES: String(nodes) },
  })
    .trim()
    .split('\n')
    .pop()!;
  const layout = '/var/lib/cascade-cluster/layout.json';
  const running = existsSync(layout)
    ? (JSON.parse(readFileSync(layout, 'utf8')) as { count: number }).count
    : 0;
  if (running !== nodes) {
    log(`starting the cluster (npm run cluster -- up --nodes ${nodes})`);
    if (running) sh('bash', [CLUSTER_SH, 'down'], { timeoutMs: 300_000 });
    sh('bash', [CLUSTER_SH, 'up', '--nodes', String(nodes)], { timeoutMs: 25 * 60_000 });
  }
  sh(NODE, [
    join(ROOT, 'packages/distribution/src/images.ts'),
    '--conformance-bin',
    bin,
    'agnhost-2.56',
    'agnhost-2.45',
  ]);
  sh('bash', [
    CLUSTER_SH,
    'import',
    join(ROOT, 'build/images/agnhost-2.56.tar'),
    join(ROOT, 'build/images/agnhost-2.45.tar'),
  ]);
  return bin;
}

/** Runs one suite (its own output streamed to `echo`), returns its results. */
export async function runSuite(
  name: SuiteName,
  bin: string,
  opts: { subset?: boolean; nodes?: number; echo?: (chunk: string) => void } = {},
): Promise<SuiteResults> {
  const nodes = opts.nodes ?? 1;
  const def = defFor(name, nodes);
  const work = join(ROOT, 'tools/conformance/.local');
  mkdirSync(work, { recursive: true });
  const report = join(work, `${name}.report.json`);
  const [cmd, ...args] = def.args(bin, report, Boolean(opts.subset), def);
  // a previous network-policy-api run's namespaces must be gone: its set-up creates them again
  if (name !== 'netpol') await namespacesGone('network-policy-conformance-', 300);
  const t0 = Date.now();
  const output = await new Promise<string>((res, rej) => {
    const p = spawn(cmd!, args, {
      cwd: work,
      env: { ...process.env, KUBECONFIG },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let text = '';
    const take = (b: Buffer) => {
      const s = b.toString();
      text += s;
      opts.echo?.(s);
    };
    p.stdout.on('data', take);
    p.stderr.on('data', take);
    p.on('error', rej);
    p.on('close', () => res(text));
  });
  writeFileSync(join(work, `${name}.log`), output);
  let tests: TestResult[];
  try {
    tests = def.parse(report, output);
  } catch (e) {
    tests = [{ name: 'suite', result: 'failed', seconds: 0, reason: `no results: ${(e as Error).message}` }];
  }
  // a suite that failed before any test ran (its set-up) is a failure, with its output's end
  if (!tests.some((t) => t.result !== 'skipped'))
    tests.push({
      name: 'suite set-up',
      result: 'failed',
      seconds: 0,
      reason: firstLines(
        output
          .split('\n')
          .filter((l) => /Error|error|FAIL/.test(l))
          .join('\n') || output.slice(-2000),
      ),
    });
  // a test skipped on purpose carries the reason (upstream's own skip message otherwise)
  for (const t of tests)
    if (t.result === 'skipped') {
      const why = def.skips.find(([re]) => re.test(t.name));
      if (why) t.reason = why[1];
    }
  // tests excluded from the run (SCTP) are listed as skipped, with the reason
  if (!opts.subset && name !== 'netpol')
    for (const s of sctpTestsOf(def))
      if (!tests.some((t) => t.name === s))
        tests.push({ name: s, result: 'skipped', seconds: 0, reason: NO_SCTP });
  tests.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const count = (r: TestResult['result']) => tests.filter((t) => t.result === r).length;
  return {
    suite: name,
    title: def.title,
    module: def.module,
    version: def.version,
    kubernetes: DEFS.netpol.version,
    cascadeCommit: git('rev-parse', '--short', 'HEAD'),
    date: new Date().toISOString(),
    subset: Boolean(opts.subset),
    nodes,
    ...(def.features ? { features: def.features } : {}),
    ...(def.notShownHere ? { notShownHere: def.notShownHere } : {}),
    command: [def.binary, ...args.map((a) => a.replace(ROOT, '.'))],
    passed: count('passed'),
    failed: tests.filter((t) => t.result === 'failed' && !t.environment).length,
    failedByEnvironment: tests.filter((t) => t.result === 'failed' && t.environment).length,
    skipped: count('skipped'),
    seconds: Math.round((Date.now() - t0) / 1000),
    adaptations: def.adaptations,
    tests,
  };
}

/** The SCTP tests of a network-policy-api suite, excluded from its run here (-test.skip). */
function sctpTestsOf(def: SuiteDef): string[] {
  const prefixes =
    def.version === DEFS['npapi-v0.2'].version
      ? ['CNPAdminTier', 'CNPBaselineTier']
      : ['AdminNetworkPolicy', 'BaselineAdminNetworkPolicy'];
  return prefixes.flatMap((p) => [`${p}EgressSCTP`, `${p}IngressSCTP`]);
}

/** Waits until no namespace with this prefix exists (a previous run's are being deleted). */
async function namespacesGone(prefix: string, seconds: number): Promise<void> {
  // the cluster's binaries, as scripts/setup.d/40-cluster.sh recorded them
  const { bin } = JSON.parse(readFileSync(join(ROOT, 'tools/cluster/.local/paths.json'), 'utf8')) as {
    bin: string;
  };
  const kubectl = join(bin, 'kubectl');
  for (let i = 0; i < seconds; i += 2) {
    const names = sh(kubectl, ['get', 'namespaces', '-o', 'name'], { env: { ...process.env, KUBECONFIG } });
    if (!names.split('\n').some((n) => n.startsWith(`namespace/${prefix}`))) return;
    await new Promise((r) => setTimeout(r, 2000));
  }
  throw new Error(`namespaces ${prefix}* still there after ${seconds} s`);
}

const git = (...args: string[]) => {
  try {
    return sh('git', ['-C', ROOT, ...args]).trim();
  } catch {
    return 'unknown';
  }
};

export function writeResults(r: SuiteResults, dir = join(ROOT, 'conformance/results')): string {
  mkdirSync(dir, { recursive: true });
  const file = join(
    dir,
    `${r.suite}${r.nodes > 1 ? `.${r.nodes}-nodes` : ''}${r.subset ? '.subset' : ''}.json`,
  );
  writeFileSync(file, `${JSON.stringify(r, null, 2)}\n`);
  return file;
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const subset = args.includes('--subset');
  const at = args.indexOf('--nodes');
  const nodes = at >= 0 ? Number(args.splice(at, 2)[1]) : 1;
  if (!Number.isInteger(nodes) || nodes < 1 || nodes > 8) {
    process.stderr.write('conformance: --nodes wants 1 to 8\n');
    process.exit(2);
  }
  const names = args.filter((a) => !a.startsWith('--')) as SuiteName[];
  const bad = names.filter((n) => !SUITES.includes(n));
  if (bad.length) {
    process.stderr.write(`conformance: unknown suite ${bad.join(', ')} (have: ${SUITES.join(', ')})\n`);
    process.exit(2);
  }
  const log = (s: string) => process.stderr.write(`[conformance] ${s}\n`);
  const bin = prepare(log, nodes);
  let failed = 0;
  for (const name of names.length ? names : SUITES) {
    log(`running ${name}${subset ? ' (subset)' : ''}`);
    const r = await runSuite(name, bin, { subset, nodes, echo: (c) => process.stderr.write(c) });
    const file = writeResults(r, subset ? join(ROOT, 'tools/conformance/.local') : undefined);
    log(
      `${name}: ${r.passed} passed, ${r.failed} failed, ${r.failedByEnvironment} failed by this machine, ${r.skipped} skipped in ${r.seconds} s -> ${file}`,
    );
    for (const t of r.tests.filter((x) => x.result === 'failed'))
      log(`  FAILED ${t.name}${t.environment ? ' (this machine)' : ''}: ${(t.reason ?? '').split('\n')[0]}`);
    failed += r.failed;
  }
  process.exit(failed ? 1 : 0);
}
