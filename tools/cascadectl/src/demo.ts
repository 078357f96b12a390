// `npm run demo`: the main job on the bundled examples, readably, with no cluster.
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { main } from './main.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const examples = join(root, 'examples');
const section = (title: string) =>
  process.stdout.write(`\n${'='.repeat(100)}\n== ${title}\n${'='.repeat(100)}\n`);

export async function demo(): Promise<number> {
  const t0 = Date.now();
  let worst = 0;
  const run = async (title: string, argv: string[]) => {
    section(`${title}   ($ cascadectl ${argv.map((a) => a.replace(`${root}/`, '')).join(' ')})`);
    const code = await main(argv);
    worst = Math.max(worst, code);
  };
  const gw = join(examples, 'gateway');
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
  process.stdout.write(`\ndemo finished in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
  return worst;
}

if (import.meta.main) process.exitCode = await demo();
