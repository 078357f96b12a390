// cascadectl netpol promote: a staged policy made real, only when asked. Set: the standard policy of
// that name written as staged (server-side apply), then the staged object deleted; Delete: the
// standard policy deleted, then the staged object. --dry-run writes nothing and prints what would be
// written and every verdict that would change (the staged object alone applied: netpol-staged.ts).
import { EFFECTIVE_GROUP } from '@cascade/core';
import { ApiError, getFirstServed, Informer, type KubeClient } from '@cascade/core/kube';
import {
  POLICY_PATHS,
  STAGED_KINDS,
  STAGED_VERSION,
  type StagedKindName,
  type StagedPolicy,
  stagedTarget,
  stagedTargetName,
} from '@cascade/netpolicy';
import { type Command, err, oneOf, out, UsageError } from '../cli.ts';
import { clientFor, liveOptions } from '../cluster.ts';
import { changesTable, loadStagedPair, stagedTruthTables } from './netpol-staged.ts';

const FIELD_MANAGER = 'cascadectl';

/** `snetpol/NAME`, `stagedadminnetworkpolicy/NAME`, `NAME` (a StagedNetworkPolicy): the kind and name. */
export function stagedRef(text: string): { kind: StagedKindName; name: string } {
  const [kindText, name] = text.includes('/') ? text.split('/', 2) : ['snetpol', text];
  const kind = (Object.keys(STAGED_KINDS) as StagedKindName[]).find((k) => {
    const d = STAGED_KINDS[k];
    return [k.toLowerCase(), d.plural, d.short].includes(kindText!.toLowerCase());
  });
  if (!kind)
    throw new UsageError(
      `"${kindText!.slice(0, 60)}" is not a staged kind (${Object.entries(STAGED_KINDS)
        .map(([k, d]) => `${d.short} (${k})`)
        .join(', ')})`,
    );
  if (!name || !/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(name))
    throw new UsageError(`"${(name ?? '').slice(0, 60)}" is not an object name`);
  return { kind, name };
}

/** The standard kind's list paths (versions, preferred first: the watch's), in its namespace if any. */
function standardPaths(kind: string, namespace: string | undefined): string[] {
  const paths = POLICY_PATHS.find(([k]) => k === kind)![1];
  return paths.map((p) => (namespace ? Informer.inNamespace(p, namespace) : p));
}

export const promoteCommand: Command = {
  name: 'netpol promote',
  summary: 'make a staged policy real (write or delete the standard policy, then the staged one)',
  usage:
    'cascadectl netpol promote [KIND/]NAME [-n NS] --kubeconfig PATH [FILES...] [--dry-run] [-o text|json]\n  (KIND: snetpol (default), sanp, sbanp, scnp or their kind names; FILES add pods and policies\n   to what the dry run judges)',
  options: {
    namespace: { type: 'string', short: 'n' },
    'dry-run': { type: 'boolean' },
    output: { type: 'string', short: 'o' },
  },
  async run(values, positionals) {
    try {
      return await promote(values, positionals);
    } catch (e) {
      if (e instanceof UsageError) throw e;
      err(`error: ${(e as Error).message.split('\n')[0]}`);
      return 1;
    }
  },
};

async function promote(
  values: Record<string, string | boolean | string[] | undefined>,
  positionals: string[],
): Promise<number> {
  const format = oneOf('output', values.output, ['text', 'json'], 'text');
  const live = liveOptions();
  if (!live)
    throw new UsageError('promote writes to a live cluster: give --kubeconfig PATH or --context NAME');
  const [refText, ...files] = positionals;
  if (!refText) throw new UsageError('which staged policy: [KIND/]NAME');
  const ref = stagedRef(refText);
  const namespaced = STAGED_KINDS[ref.kind].namespaced;
  const namespace = namespaced ? String(values.namespace ?? 'default') : undefined;
  if (!namespaced && values.namespace !== undefined)
    throw new UsageError(`${ref.kind} is cluster-scoped: -n does not apply`);
  const isMine = (s: StagedPolicy) =>
    s.kind === ref.kind && s.policy.name === ref.name && s.policy.namespace === namespace;
  const pair = loadStagedPair(files, isMine);
  const mine = pair.enforced.staged.find((s) => isMine(s.policy));
  const label = `${ref.kind} ${namespace ? `${namespace}/` : ''}${ref.name}`;
  if (!mine) {
    err(`error: ${label}: not found (or refused: see above)`);
    return 2;
  }
  const target = mine.policy.policy;
  // refused as the standard kind would be: the engine's errors for it (printed above) stop it here
  const invalid = pair.staged.engine
    .problems()
    .find((p) => p.policy === stagedTarget(mine.policy) && p.errors.length);
  if (mine.policy.action === 'Set' && invalid) {
    err(`error: ${label}: not promoted: its spec has errors (above); fix the staged policy first`);
    return 2;
  }
  const targetLabel = stagedTargetName(mine.policy);
  const changes = stagedTruthTables(pair, () => true).flatMap((t) => t.changes);
  const client = await clientFor(live);
  const dry = values['dry-run'] === true;
  const done: string[] = [];
  const paths = standardPaths(target.kind, namespace);
  const { index } = await getFirstServed(
    client,
    paths.map((p) => `${p}?limit=1`),
  ).catch((e) => {
    throw new Error(`${target.kind}: not served by this cluster (${(e as Error).message.split('\n')[0]})`);
  });
  const base = paths[index]!;
  const apiVersion = base.split('/').slice(2, 4).join('/');
  if (mine.policy.action === 'Set') {
    const body = {
      apiVersion,
      kind: target.kind,
      metadata: { name: target.name, ...(namespace ? { namespace } : {}) },
      spec: target.spec,
    };
    if (!dry) await client.apply(`${base}/${target.name}`, body, FIELD_MANAGER);
    done.push(`${dry ? 'would apply' : 'applied'} ${targetLabel}`);
  } else {
    if (!dry) await deleteOrSay(client, `${base}/${target.name}`, targetLabel);
    done.push(`${dry ? 'would delete' : 'deleted'} ${targetLabel}`);
  }
  const stagedPath = `/apis/${EFFECTIVE_GROUP}/${STAGED_VERSION}${namespace ? `/namespaces/${namespace}` : ''}/${STAGED_KINDS[ref.kind].plural}/${ref.name}`;
  if (!dry) await deleteOrSay(client, stagedPath, label);
  done.push(`${dry ? 'would delete' : 'deleted'} ${label}`);
  if (format === 'json') {
    out(JSON.stringify({ dryRun: dry, done, changes }, null, 2));
    return 0;
  }
  for (const d of done) out(d);
  out(
    changes.length
      ? changesTable(pair, changes, `${changes.length} verdict(s) it ${dry ? 'would change' : 'changed'}:`)
      : 'no verdict changes among the pods read',
  );
  return 0;
}

async function deleteOrSay(client: KubeClient, path: string, label: string): Promise<void> {
  try {
    await client.request('DELETE', path);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) throw new Error(`${label}: not found in the cluster`);
    throw e;
  }
}
