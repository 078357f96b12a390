// npm run conformance [-- [--subset] [SUITE...]]: the upstream network-policy test suites against
// Cascade on the real single-node cluster (tools/cluster), nobody here having written them:
//   netpol      the Kubernetes NetworkPolicy e2e tests (k8s.io/kubernetes test/e2e/network/netpol)
//   npapi-v0.1  network-policy-api conformance: AdminNetworkPolicy, BaselineAdminNetworkPolicy
//   npapi-v0.2  network-policy-api conformance: ClusterNetworkPolicy v1alpha2
//   npapi-v0.3  network-policy-api conformance: ClusterNetworkPolicy v1beta1, run as its conformance
//               profile, which also writes the report in upstream's format (conformance/reports/)
// Built from their Go modules (build/build.sh), with their agnhost workload image built here too. A
// full run writes conformance/results/<suite>.json (version, date, passed, failed, each skip with its
// reason, each test's time, a failure's message); `--subset` runs a representative few (npm test) and
// writes to tools/conformance/.local instead.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { hideOtherBundles, KUBECONFIG, namespacesGone, restoreBundles } from './cluster-state.ts';
import { firstLines, parseGinkgo, parseGoTest, type TestResult } from './parse.ts';

export { parseGinkgo, parseGoTest, type TestResult } from './parse.ts';

export const ROOT = resolve(import.meta.dirname, '../../..');
const CLUSTER_SH = join(ROOT, 'tools/cluster/cluster.sh');
const NODE = join(ROOT, 'node_modules/.bin/node');

export type SuiteName = 'netpol' | 'npapi-v0.1' | 'npapi-v0.2' | 'npapi-v0.3';
export const SUITES: SuiteName[] = ['netpol', 'npapi-v0.1', 'npapi-v0.2', 'npapi-v0.3'];
/**
 * The suites whose subsets `npm test` runs: v0.3's tests are v0.2's on v1beta1 and more, and where
 * v0.3's CRDs are installed (the chart's) Cascade reads v1beta1 whatever version a test wrote, so
 * v0.2's subset would show nothing v0.3's does not; `npm run conformance` runs v0.2 in full.
 */
export const SUBSET_SUITES: SuiteName[] = ['netpol', 'npapi-v0.1', 'npapi-v0.3'];

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
  /** what enforced, when not Cascade (a peer: npm run cluster -- up --netpol) */
  implementation?: string;
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
  /** the suite's own report (network-policy-api v0.3's ConformanceReport, YAML), when it writes one */
  upstreamReport?: string;
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
  /** the subset's tests by name, where the suite can run a part of them (netpol: --ginkgo.focus) */
  subsetTests?: string[];
  /** tests not run on this machine, matched by name, and why */
  skips: [RegExp, string][];
  adaptations: string[];
  parse: (report: string, output: string) => TestResult[];
  /** the suite writes its own ConformanceReport (YAML) to the report path */
  upstreamReport?: boolean;
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

/** Who Cascade is, for network-policy-api's ConformanceReport (`implementation`). */
const IMPLEMENTATION = {
  organization: 'cascade-dev',
  project: 'cascade',
  url: 'https://github.com/cascade-dev/cascade',
  contact: 'https://github.com/cascade-dev/cascade/issues/new',
};

/**
 * network-policy-api v0.3's suite as its conformance profile (TestConformanceProfiles): the standard
 * tests, the experimental ones of the features declared (standard ones are implied: only experimental
 * features are passed), and the ConformanceReport it writes itself. It checks that the installed
 * CRDs' bundle-version is its own (v0.3.0: the chart's).
 */
const npapiProfile = (
  version: string,
  binary: string,
  features: string[],
  notShownHere: string[],
  subset: string[],
): SuiteDef => ({
  ...npapi(version, binary, features, notShownHere, subset),
  upstreamReport: true,
  adaptations: [
    NPAPI_ADAPTATION.replace(
      'and the SCTP tests are skipped',
      "and the SCTP tests run and fail on their SCTP probes with the kernel's own error (counted as failed by this machine here, and as failed in the report, which counts what ran)",
    ),
    NPAPI_ONE_NODE,
    "the suite refuses a cluster holding CRDs of two network-policy-api bundles (it reads every CRD's bundle-version and channel annotations); v0.3.0 ships ClusterNetworkPolicy alone and the chart installs v0.1.7's AdminNetworkPolicy and BaselineAdminNetworkPolicy beside it, so those two CRDs' two annotations are taken off for the run and put back after; nothing else of them changes",
  ],
  args: (bin, report, sub, d) => [
    join(bin, binary),
    '-test.v',
    '-test.timeout=90m',
    // SCTP's tests run (unlike the older suites'): skipped, they would be missing from the report,
    // which counts what ran; here they fail with the kernel's own error, marked as this machine's
    `-test.run=^TestConformanceProfiles$${sub ? `/^(${subset.join('|')})$` : ''}`,
    '-conformance-profiles=ClusterNetworkPolicy',
    `-supported-features=${(d.features ?? features).filter((f) => f !== 'ClusterNetworkPolicy').join(',')}`,
    `-organization=${IMPLEMENTATION.organization}`,
    `-project=${IMPLEMENTATION.project}`,
    `-url=${IMPLEMENTATION.url}`,
    `-version=${cascadeVersion()}`,
    `-contact=${IMPLEMENTATION.contact}`,
    `-additional-info=npm run conformance -- --nodes N npapi-v0.3 (this repository at the version's commit; results in conformance/results/)`,
    `-report-output=${report}`,
    '-cleanup-base-resources=true',
  ],
});

/** The chart's appVersion and the commit: what a report certifies. */
function cascadeVersion(): string {
  const chart = readFileSync(join(ROOT, 'charts/cascade/Chart.yaml'), 'utf8');
  const app = /^appVersion:\s*"?([^"\s]+)"?/m.exec(chart)?.[1] ?? '0.0.0';
  return `v${app}+${git('rev-parse', '--short', 'HEAD')}`;
}

export const DEFS: Record<SuiteName, SuiteDef> = {
  netpol: {
    title: 'Kubernetes NetworkPolicy e2e (test/e2e/network/netpol)',
    module: 'k8s.io/kubernetes',
    version: 'v1.34.4',
    binary: 'netpol.test',
    subsetTests: NETPOL_SUBSET,
    args: (bin, report, subset, d) => [
      join(bin, 'netpol.test'),
      `--kubeconfig=${KUBECONFIG}`,
      '--provider=local',
      '--ginkgo.skip=SCTPConnectivity',
      ...(subset ? [focusArg(d.subsetTests ?? NETPOL_SUBSET)] : []),
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
  // npm test's subset: a test v0.2.1 added (pods selectors without namespaceSelector, and a pod's
  // labels changed under a policy: it found a bug) and a named port in the Baseline tier (7 s; v0.2.1's
  // same-priority test took 40 s on one node)
  'npapi-v0.3': npapiProfile(
    'v0.3.0',
    'npapi-v0.3.test',
    ['ClusterNetworkPolicy', 'ClusterNetworkPolicyNamedPorts'],
    ['ClusterNetworkPolicyEgressNodePeers'],
    ['CNPAdminTierPodSelector', 'CNPBaselineTierEgressNamedPort'],
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

/** ginkgo's focus on exactly these tests (by name) */
const focusArg = (tests: string[]) => `--ginkgo.focus=${tests.map(escapeRegex).join('|')}`;

const byName = (a: TestResult, b: TestResult) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

/** The counts a SuiteResults gives of its tests (a failure this machine caused counted apart). */
function tally(tests: TestResult[]) {
  const count = (r: TestResult['result']) => tests.filter((t) => t.result === r).length;
  return {
    passed: count('passed'),
    failed: tests.filter((t) => t.result === 'failed' && !t.environment).length,
    failedByEnvironment: tests.filter((t) => t.result === 'failed' && t.environment).length,
    skipped: count('skipped'),
  };
}

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
export function prepare(
  log: (s: string) => void = () => {},
  nodes = 1,
  netpol = 'cascade',
  suites: SuiteName[] = SUITES,
): string {
  // only the suites to run: a first build of the others is not waited for (npm test runs three)
  const binaries = [...new Set([...suites.map((s) => DEFS[s].binary), 'agnhost'])];
  const bin = sh('bash', [join(ROOT, 'tools/conformance/build/build.sh'), ...binaries], {
    env: { ...process.env, CONFORMANCE_NODES: String(nodes) },
  })
    .trim()
    .split('\n')
    .pop()!;
  const layout = '/var/lib/cascade-cluster/layout.json';
  const recorded = existsSync(layout)
    ? (JSON.parse(readFileSync(layout, 'utf8')) as { count: number; netpol?: string })
    : undefined;
  // the cluster this run wants: its node count, and what enforces (Cascade, or a peer)
  if (recorded?.count !== nodes || (recorded.netpol ?? 'cascade') !== netpol) {
    const peer = netpol === 'cascade' ? [] : ['--netpol', netpol];
    log(
      `starting the cluster (npm run cluster -- up --nodes ${nodes}${peer.length ? ` ${peer.join(' ')}` : ''})`,
    );
    if (recorded) sh('bash', [CLUSTER_SH, 'down'], { timeoutMs: 300_000 });
    sh('bash', [CLUSTER_SH, 'up', '--nodes', String(nodes), ...peer], { timeoutMs: 25 * 60_000 });
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
  opts: {
    subset?: boolean;
    nodes?: number;
    echo?: (chunk: string) => void;
    /** this part of the subset's tests only (every `of`-th from `index`), in files of its own */
    part?: { index: number; of: number };
  } = {},
): Promise<SuiteResults> {
  const nodes = opts.nodes ?? 1;
  const whole = defFor(name, nodes);
  const part = opts.part;
  if (part && !(opts.subset && whole.subsetTests))
    throw new Error(`${name}: only a subset of a suite that names its tests can run in parts`);
  const def = part
    ? { ...whole, subsetTests: whole.subsetTests!.filter((_, i) => i % part.of === part.index) }
    : whole;
  const stem = part ? `${name}.part${part.index + 1}` : name;
  const work = join(ROOT, 'tools/conformance/.local');
  mkdirSync(work, { recursive: true });
  const report = join(work, `${stem}.report.${def.upstreamReport ? 'yaml' : 'json'}`);
  rmSync(report, { force: true }); // what exists after the run is this run's
  const [cmd, ...args] = def.args(bin, report, Boolean(opts.subset), def);
  // a previous network-policy-api run's namespaces must be gone: its set-up creates them again
  if (name !== 'netpol') await namespacesGone('network-policy-conformance-', 300);
  const t0 = Date.now();
  const hidden = def.upstreamReport ? hideOtherBundles(def.version) : [];
  // a run stopped by a signal still puts the annotations back
  const onSignal = (sig: NodeJS.Signals) => {
    restoreBundles(hidden);
    process.exit(sig === 'SIGINT' ? 130 : 143);
  };
  if (hidden.length) for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, onSignal);
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
  }).finally(() => {
    for (const sig of ['SIGINT', 'SIGTERM'] as const) process.off(sig, onSignal);
    restoreBundles(hidden);
  });
  writeFileSync(join(work, `${stem}.log`), output);
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
  tests.sort(byName);
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
    ...tally(tests),
    seconds: Math.round((Date.now() - t0) / 1000),
    adaptations: def.adaptations,
    ...(def.upstreamReport && existsSync(report) ? { upstreamReport: readFileSync(report, 'utf8') } : {}),
    tests,
  };
}

/**
 * npm test's subsets side by side, which takes the time of the longest instead of the sum: the
 * NetworkPolicy e2e tests in `netpolParts` processes (each test makes three namespaces of its own
 * with generated names, so parts share nothing) beside the network-policy-api suites, run one after
 * the other (they share fixed namespaces and base workloads, and their policies' subjects are those
 * namespaces' pods only). On two cores it saves a third, not more: the NetworkPolicy suite's probes
 * are `kubectl exec`s, so its tests are CPU-bound. Their output is not echoed (it would interleave):
 * each run's log is kept in tools/conformance/.local.
 */
export async function runSubsets(
  bin: string,
  opts: { nodes?: number; netpolParts?: number } = {},
): Promise<SuiteResults[]> {
  const of = Math.max(1, Math.min(opts.netpolParts ?? 2, NETPOL_SUBSET.length));
  const run = { nodes: opts.nodes, subset: true };
  const netpol = Promise.all(
    Array.from({ length: of }, (_, index) => runSuite('netpol', bin, { ...run, part: { index, of } })),
  ).then(mergeParts);
  const npapi = (async () => {
    const out: SuiteResults[] = [];
    for (const s of SUBSET_SUITES.filter((n) => n !== 'netpol')) out.push(await runSuite(s, bin, run));
    return out;
  })();
  const [n, rest] = await Promise.all([netpol, npapi]);
  return [n, ...rest];
}

/**
 * One suite's results from the results of its parts run side by side: a test counts with the result
 * of the part that ran it (every part lists the others' tests as skipped by its focus), the time is
 * the longest part's, the command the whole subset's focus.
 */
export function mergeParts(parts: SuiteResults[]): SuiteResults {
  const first = parts[0];
  if (!first) throw new Error('mergeParts: no part');
  const ran = new Map<string, TestResult>();
  for (const t of parts.flatMap((p) => p.tests)) {
    const had = ran.get(t.name);
    if (!had || (had.result === 'skipped' && t.result !== 'skipped')) ran.set(t.name, t);
  }
  const tests = [...ran.values()].sort(byName);
  const focus = DEFS[first.suite].subsetTests;
  return {
    ...first,
    command: first.command.map((a) => (a.startsWith('--ginkgo.focus=') && focus ? focusArg(focus) : a)),
    ...tally(tests),
    seconds: Math.max(...parts.map((p) => p.seconds)),
    adaptations: [
      ...first.adaptations,
      ...(parts.length > 1
        ? [
            `run as ${parts.length} processes side by side, each focused on a part of the subset's tests (each test makes its own namespaces); seconds are the longest part's`,
          ]
        : []),
    ],
    tests,
  };
}

/** The SCTP tests of a network-policy-api suite, excluded from its run here (-test.skip). */
function sctpTestsOf(def: SuiteDef): string[] {
  const prefixes =
    def.version === DEFS['npapi-v0.2'].version || def.version === DEFS['npapi-v0.3'].version
      ? ['CNPAdminTier', 'CNPBaselineTier']
      : ['AdminNetworkPolicy', 'BaselineAdminNetworkPolicy'];
  return prefixes.flatMap((p) => [`${p}EgressSCTP`, `${p}IngressSCTP`]);
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
  const name = `${r.suite}${r.nodes > 1 ? `.${r.nodes}-nodes` : ''}${r.subset ? '.subset' : ''}`;
  const file = join(dir, `${name}.json`);
  const { upstreamReport, ...rest } = r;
  writeFileSync(file, `${JSON.stringify(rest, null, 2)}\n`);
  // the suite's own report, as upstream collects them (conformance/reports/VERSION/PROJECT.yaml):
  // a full run on two or more nodes is the one to submit; others stay beside their results
  if (upstreamReport) {
    const submit = !r.subset && r.nodes > 1 && dir === join(ROOT, 'conformance/results');
    const reports = submit ? join(ROOT, 'conformance/reports', r.version) : dir;
    mkdirSync(reports, { recursive: true });
    writeFileSync(
      join(reports, submit ? `${IMPLEMENTATION.project}.yaml` : `${name}.report.yaml`),
      upstreamReport,
    );
  }
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
  // a peer instead of Cascade (npm run cluster -- up --netpol): its results beside Cascade's, in
  // conformance/results/PEER/ (its failures are its own)
  const np = args.indexOf('--netpol');
  const netpol = np >= 0 ? args.splice(np, 2)[1]! : 'cascade';
  const names = args.filter((a) => !a.startsWith('--')) as SuiteName[];
  const bad = names.filter((n) => !SUITES.includes(n));
  if (bad.length) {
    process.stderr.write(`conformance: unknown suite ${bad.join(', ')} (have: ${SUITES.join(', ')})\n`);
    process.exit(2);
  }
  const log = (s: string) => process.stderr.write(`[conformance] ${s}\n`);
  // `--subset` alone: npm test's subsets as npm test runs them, side by side (their output in
  // tools/conformance/.local/SUITE[.partN].log, not echoed: it would interleave)
  const sideBySide = subset && !names.length;
  const bin = prepare(log, nodes, netpol, sideBySide ? SUBSET_SUITES : names.length ? names : SUITES);
  let failed = 0;
  if (sideBySide) log(`running ${SUBSET_SUITES.join(', ')} (subsets, side by side)`);
  const runs = sideBySide
    ? await runSubsets(bin, { nodes })
    : (names.length ? names : SUITES).map((name) => async () => {
        log(`running ${name}${subset ? ' (subset)' : ''}`);
        return runSuite(name, bin, { subset, nodes, echo: (c) => process.stderr.write(c) });
      });
  for (const next of runs) {
    const r = typeof next === 'function' ? await next() : next;
    const name = r.suite;
    const file = writeResults(
      netpol === 'cascade' ? r : { ...r, implementation: netpol },
      // a peer's runs are all kept (its subset too: the suite npm test runs against Cascade)
      netpol !== 'cascade'
        ? join(ROOT, 'conformance/results', netpol)
        : subset
          ? join(ROOT, 'tools/conformance/.local')
          : undefined,
    );
    log(
      `${name}: ${r.passed} passed, ${r.failed} failed, ${r.failedByEnvironment} failed by this machine, ${r.skipped} skipped in ${r.seconds} s -> ${file}`,
    );
    for (const t of r.tests.filter((x) => x.result === 'failed'))
      log(`  FAILED ${t.name}${t.environment ? ' (this machine)' : ''}: ${(t.reason ?? '').split('\n')[0]}`);
    failed += r.failed;
  }
  process.exit(failed ? 1 : 0);
}
