// cascadectl cleanup: after `helm uninstall`, removes what Cascade's controllers wrote into the
// cluster and Helm does not know of (core/src/controller/cleanup.ts says how, the distribution manifest what). Needs a live cluster.
import { cleanupCluster } from '@cascade/core';
import { CLEANUP_PLAN } from '@cascade/distribution';
import { type Command, oneOf, out, UsageError } from '../cli.ts';
import { clientFor, liveOptions } from '../cluster.ts';

export const cleanupCommand: Command = {
  name: 'cleanup',
  summary:
    'after helm uninstall: remove the EffectivePolicies, AuthConfigs, Limitador ConfigMaps, wiring objects, slices, Leases and Affected conditions Cascade wrote',
  usage:
    'cascadectl cleanup --kubeconfig PATH [--release-namespace NS] [--limitador NS/NAME] [--dry-run] [-o text|json]',
  options: {
    'release-namespace': { type: 'string' },
    limitador: { type: 'string' },
    'dry-run': { type: 'boolean' },
    output: { type: 'string', short: 'o' },
  },
  async run(values) {
    const format = oneOf('output', values.output, ['text', 'json'], 'text');
    const live = liveOptions();
    if (!live)
      throw new UsageError('cleanup works on a live cluster: give --kubeconfig PATH or --context NAME');
    const releaseNamespace = String(values['release-namespace'] ?? 'cascade-system');
    const limitador = values.limitador === undefined ? undefined : String(values.limitador);
    if (limitador !== undefined && !/^[a-z0-9-]{1,63}\/[a-z0-9.-]{1,253}$/.test(limitador))
      throw new UsageError(`--limitador: "${limitador.slice(0, 80)}" is not NAMESPACE/NAME`);
    const dry = values['dry-run'] === true;
    const report = await cleanupCluster(await clientFor(live), CLEANUP_PLAN, {
      releaseNamespace,
      ...(limitador ? { aggregate: limitador } : {}),
      dry,
    });
    if (format === 'json') out(JSON.stringify({ dryRun: dry, ...report }, null, 2));
    else {
      for (const r of report.removed) out(`${dry ? 'would remove' : 'removed'} ${r}`);
      for (const f of report.failed) out(`FAILED ${f}`);
      out(
        `${report.removed.length} ${dry ? 'to remove' : 'removed'}, ${report.failed.length} failed${report.notServed.length ? `; not served (nothing to remove): ${report.notServed.join(', ')}` : ''}`,
      );
    }
    return report.failed.length ? 1 : 0;
  },
};
