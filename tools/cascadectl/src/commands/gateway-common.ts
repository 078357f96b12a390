// Shared by the gateway-policy commands: load files, build engines, report problems on stderr.
import { err, UsageError } from '../cli.ts';
import { loadManifests } from '../load.ts';
import { buildGatewayWorld, type GatewayWorld, POLICY_KINDS } from '../world.ts';

export const kindOption = { kind: { type: 'string' as const } };

export function loadGatewayWorld(files: string[], kind: unknown): { world: GatewayWorld; problems: number } {
  if (files.length === 0) throw new UsageError('at least one file or folder is required');
  if (kind !== undefined && !POLICY_KINDS.some((k) => k.kind === kind)) {
    throw new UsageError(
      `--kind must be one of ${POLICY_KINDS.map((k) => k.kind).join(', ')} (got "${String(kind)}")`,
    );
  }
  const loaded = loadManifests(files);
  const world = buildGatewayWorld(loaded.manifests, kind as string | undefined);
  for (const n of world.notes) err(`note: ${n}`);
  const problems = [...loaded.problems, ...world.problems];
  for (const p of problems) err(`error: ${p}`);
  return { world, problems: problems.length };
}
