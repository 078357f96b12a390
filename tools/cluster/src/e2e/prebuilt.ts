// The images two later steps roll the cluster to, built and imported in the background while the
// steps before them wait on the cluster: the restart-and-upgrade step's rebuilt component images and
// the conntrack-upgrade step's agent carrying the previous datapath. Built in their own steps they
// put about 25 s of CPU (more on a slower machine) on the run's longest path; started after the
// install step, they use what the gateway, netpol and Services steps leave idle. Each step awaits its
// images, so a failed build fails that step with the build's error, as before.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { CLUSTER_SH, NODE, ROOT, shAsync } from '../harness.ts';
import { work } from './shared.ts';

/** The last commit whose datapath kept conntrack in the kernel's LRU hash. */
export const LRU_DATAPATH = '7d4e4c113b804f43724d87079fb5526cfd7328f5';
/** What a helm upgrade rolls the controllers and the agent to (lifecycle.ts restartAndUpgrade). */
export const COMPONENT_IMAGES = [
  'authpolicy-controller',
  'ratelimitpolicy-controller',
  'tokenratelimitpolicy-controller',
  'wiring-controller',
  'netpolicy-controller',
  'netpolicy-agent',
];
export const REBUILT_TAG = '0.1.0-rebuilt';
export const LRU_TAG = '0.1.0-lru-datapath';

const IMAGES_TS = join(ROOT, 'packages/distribution/src/images.ts');
/**
 * Image archives imported into the cluster's containerd (the e2e builds images, no registry), through
 * the cluster's own `import` verb: every node, and only the images a node lacks (node.ts importArchives).
 */
const importAsync = (...tars: string[]) => shAsync('bash', [CLUSTER_SH, 'import', ...tars], 300_000);

const builds = new Map<string, Promise<number>>();
/** The build named `name`, started on the first call; resolves to its seconds (build and import). */
function once(name: string, build: () => Promise<void>): Promise<number> {
  let p = builds.get(name);
  if (!p) {
    const t0 = Date.now();
    p = build().then(() => (Date.now() - t0) / 1000);
    // awaited by its step later: not an unhandled rejection meanwhile
    p.catch(() => undefined);
    builds.set(name, p);
  }
  return p;
}

/** The component images built again from the same inputs under REBUILT_TAG, imported into the node. */
export const rebuiltImages = () =>
  once('rebuilt', async () => {
    const out = join(work, 'images');
    await shAsync(NODE, [IMAGES_TS, '--tag', REBUILT_TAG, '--out', out, ...COMPONENT_IMAGES], 300_000);
    await importAsync(...COMPONENT_IMAGES.map((img) => join(out, `${img}.tar`)));
  });

/** The agent image under LRU_TAG with the datapath of LRU_DATAPATH, imported into the node. */
export const olderDatapathImage = () =>
  once('lru-datapath', async () => {
    const out = join(work, 'lru-images');
    const build = await olderDatapath();
    await shAsync(
      NODE,
      [IMAGES_TS, '--tag', LRU_TAG, '--out', out, '--datapath-build', build, 'netpolicy-agent'],
      300_000,
    );
    await importAsync(join(out, 'netpolicy-agent.tar'));
  });

/** Both, started now (the e2e calls this once its install step is done). */
export function startPrebuilds(): void {
  void rebuiltImages();
  void olderDatapathImage();
}

/** The previous datapath's BPF object and bpfctl, compiled from git; this build's CNI plugin. */
async function olderDatapath(): Promise<string> {
  const dir = join(work, 'lru-datapath');
  const src = join(dir, 'src');
  mkdirSync(src, { recursive: true });
  // fails (and so fails the step, also in CI) when the clone lacks the commit: no silent skip
  const tar = join(dir, 'src.tar');
  const paths = ['packages/bpf-datapath/bpf', 'packages/bpf-datapath/native'];
  await shAsync('git', ['-C', ROOT, 'archive', '-o', tar, LRU_DATAPATH, ...paths]);
  await shAsync('tar', ['-xf', tar, '-C', src]);
  const pkg = join(src, 'packages/bpf-datapath');
  const arch = (await shAsync('gcc', ['-dumpmachine'])).trim();
  const bpf = join(pkg, 'bpf/cascade.bpf.c');
  const obj = join(dir, 'cascade.bpf.o');
  await shAsync(
    'clang',
    ['-O2', '-g', '-Wall', '-target', 'bpf', `-I/usr/include/${arch}`, '-c', bpf, '-o', obj],
    120_000,
  );
  await shAsync(
    'gcc',
    ['-O2', '-Wall', '-o', join(dir, 'cascade-bpfctl'), join(pkg, 'native/bpfctl.c'), '-lbpf'],
    120_000,
  );
  await shAsync('cp', [join(ROOT, 'packages/bpf-datapath/build/cascade-cni'), dir]);
  return dir;
}
