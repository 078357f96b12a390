// Shared by the gateway-policy commands: load files, build engines, report problems on stderr.
import { err, UsageError } from '../cli.ts';
import { GATEWAY_KINDS, resolveKind } from '../kinds.ts';
import { hasInput, type LoadResult, loadManifests } from '../load.ts';
import { labelIndex } from '../selector.ts';
import { buildGatewayWorld, type GatewayWorld } from '../world.ts';
import { loadNetpol } from './netpol.ts';

export const kindOption = { kind: { type: 'string' as const } };

/**
 * Loads the files (or takes manifests a caller already loaded and reported: then their read and
 * parse problems are not printed again here) and builds the gateway-policy engines.
 */
export function loadGatewayWorld(
  files: string[],
  kind: unknown,
  preloaded?: LoadResult,
): { world: GatewayWorld; problems: number; labels: ReturnType<typeof labelIndex> } {
  if (!hasInput(files))
    throw new UsageError('at least one file or folder (or --kubeconfig/--context) is required');
  kind = resolveKind(kind, GATEWAY_KINDS);
  const loaded = preloaded ?? loadManifests(files);
  const world = buildGatewayWorld(loaded.manifests, kind as string | undefined);
  for (const n of world.notes) err(`note: ${n}`);
  const problems = [...(preloaded ? [] : loaded.problems), ...world.problems];
  for (const p of problems) err(`error: ${p}`);
  return {
    world,
    problems: loaded.problems.length + world.problems.length,
    labels: labelIndex(loaded.manifests),
  };
}

/** For commands that use both worlds: the files read once, their problems reported once. */
export function loadBothWorlds(files: string[]): {
  loaded: LoadResult;
  gateway: ReturnType<typeof loadGatewayWorld>;
  netpol: ReturnType<typeof loadNetpol>;
} {
  if (!hasInput(files))
    throw new UsageError('at least one file or folder (or --kubeconfig/--context) is required');
  const loaded = loadManifests(files);
  for (const p of loaded.problems) err(`error: ${p}`);
  return { loaded, gateway: loadGatewayWorld(files, undefined, loaded), netpol: loadNetpol(files, loaded) };
}
