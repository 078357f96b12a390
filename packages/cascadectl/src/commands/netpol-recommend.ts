// cascadectl netpol recommend: least-privilege NetworkPolicies for a namespace from the flows its
// pods were seen to make (the agents report allowed flows of --audit-namespaces), written as
// StagedNetworkPolicies by default so they are tried on live traffic before they enforce, and proved
// before they are printed: the policies enforced beside everything else, every observed connection
// judged again, and the pod pairs they admit beyond what was seen listed.
import { EFFECTIVE_GROUP } from '@cascade/core';
import { type Recommendation, recommend, STAGED_VERSION } from '@cascade/netpolicy';
import { stringify } from 'yaml';
import { onAgent } from '../agent-exec.ts';
import { type Command, err, oneOf, out, UsageError } from '../cli.ts';
import { liveOptions } from '../cluster.ts';
import { type LoadResult, loadManifests } from '../load.ts';
import { buildNetpolWorld } from '../netpol-world.ts';
import { FLOWS_READ } from './flows.ts';
import { addFlowLines, type FlowReading, newReading, readFlowFile, sinceMs } from './recommend-flows.ts';
import { observedConnections, prove } from './recommend-proof.ts';

const NS_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** The recommended policy as it is written: a StagedNetworkPolicy (Set), or with --standard as is. */
export function asWritten(r: Recommendation, standard: boolean): Record<string, unknown> {
  if (standard) return { ...r.policy };
  return {
    apiVersion: `${EFFECTIVE_GROUP}/${STAGED_VERSION}`,
    kind: 'StagedNetworkPolicy',
    metadata: r.policy.metadata,
    spec: { ...r.policy.spec, stagedAction: 'Set' },
  };
}

/** Every node's agent's flows of `namespace`, through pods/exec (as `cascadectl flows --node`). */
async function liveFlows(loaded: LoadResult, namespace: string, into: FlowReading): Promise<string[]> {
  const notes: string[] = [];
  const nodes = loaded.manifests.filter((m) => m.kind === 'Node').map((m) => m.metadata.name);
  if (!nodes.length) throw new UsageError("the cluster lists no Node: cannot read the agents' flows");
  let read = 0;
  for (const node of nodes) {
    try {
      const agent = await onAgent('--node', node, 'the flows');
      await agent.run([...FLOWS_READ, `namespace=${namespace}`], (lines) =>
        addFlowLines(into, `node ${node}`, lines),
      );
      read++;
    } catch (e) {
      notes.push(`node ${node}: ${(e as Error).message}`);
    }
  }
  if (!read) throw new UsageError(`no agent's flows could be read:\n  ${notes.join('\n  ')}`);
  return notes;
}

export const recommendCommand: Command = {
  name: 'netpol recommend',
  summary:
    'least-privilege NetworkPolicies for a namespace from its observed flows, proved by simulation (staged by default)',
  usage:
    "cascadectl netpol recommend -n NS (--kubeconfig PATH | FILES... --flows FLOWS...) [--since 1h] [--standard] [--no-dns] [-o yaml|json]\n  (flows: the agents' (allowed flows are reported for --audit-namespaces), or NDJSON files as\n   `cascadectl flows -o json` prints them; the objects: the live cluster's, or FILES;\n   the policies go to standard output as StagedNetworkPolicies (--standard: NetworkPolicies),\n   the proof to standard error: exit 1 when an observed flow would not be allowed)",
  options: {
    namespace: { type: 'string', short: 'n' },
    flows: { type: 'string', multiple: true },
    since: { type: 'string' },
    standard: { type: 'boolean' },
    'no-dns': { type: 'boolean' },
    'save-flows': { type: 'string' },
    output: { type: 'string', short: 'o' },
  },
  async run(values, files) {
    const format = oneOf('output', values.output, ['yaml', 'json'], 'yaml');
    const namespace = values.namespace as string | undefined;
    if (!namespace || !NS_NAME.test(namespace))
      throw new UsageError('-n NS: the namespace to write policies for');
    const sinceText = values.since as string | undefined;
    const window = sinceText === undefined ? undefined : sinceMs(sinceText);
    if (sinceText !== undefined && window === undefined)
      throw new UsageError(`--since ${sinceText.slice(0, 20)}: a duration such as 30m, 1h or 2d`);
    const flowFiles = (values.flows as string[] | undefined) ?? [];
    const live = liveOptions();
    if (!flowFiles.length && !live)
      throw new UsageError("give --flows FILE (saved flows) with the objects' FILES, or --kubeconfig PATH");
    if (!files.length && !live)
      throw new UsageError('the objects (pods, namespaces, policies): FILES or --kubeconfig');
    const loaded = loadManifests(files);
    const world = buildNetpolWorld(loaded.manifests);
    const problems = [...loaded.problems, ...world.problems.filter((p) => !p.includes('warning:'))];
    for (const p of problems) err(`error: ${p}`);

    const reading = newReading();
    const notes: string[] = [];
    if (flowFiles.length) for (const f of flowFiles) readFlowFile(reading, f);
    else notes.push(...(await liveFlows(loaded, namespace, reading)));
    if (reading.errorCount) {
      for (const e of reading.errors) err(`error: ${e}`);
      if (reading.errorCount > reading.errors.length)
        err(`error: ... and ${reading.errorCount - reading.errors.length} more`);
      return 2;
    }
    if (values['save-flows'] !== undefined) {
      const { writeFileSync } = await import('node:fs');
      writeFileSync(
        String(values['save-flows']),
        reading.flows
          .map((f) =>
            JSON.stringify({
              ...(f.at !== undefined ? { time: new Date(f.at).toISOString() } : {}),
              direction: f.direction,
              verdict: f.verdict,
              from: f.from,
              to: f.to,
              protocol: f.protocol,
              port: f.port,
              ...(f.count > 1 ? { repeats: f.count - 1 } : {}),
            }),
          )
          .join('\n') + (reading.flows.length ? '\n' : ''),
      );
    }
    for (const [proto, n] of reading.skipped)
      notes.push(`${n} ${proto} flow record(s) left out: a NetworkPolicy names TCP, UDP and SCTP only`);

    const observed = observedConnections(
      reading.flows,
      world,
      namespace,
      window === undefined ? undefined : Date.now() - window,
    );
    notes.push(...observed.notes);
    if (!observed.connections.length) {
      for (const n of notes) err(`note: ${n}`);
      err(
        `no allowed flow of ${namespace} was seen${live && !flowFiles.length ? ` (the agents report allowed flows only for the namespaces of their --audit-namespaces, chart value agent.auditNamespaces)` : ''}: nothing to recommend`,
      );
      return problems.length ? 2 : 1;
    }
    const result = recommend({
      namespace,
      pods: world.engine.pods.values(),
      connections: observed.connections,
      dns: !values['no-dns'],
    });
    notes.push(...result.notes);

    // the proof: the recommended policies enforced beside everything the world holds (one of the
    // same name replaced, as an apply would)
    for (const r of result.recommendations)
      world.engine.upsertPolicy({
        kind: 'NetworkPolicy',
        namespace: r.policy.metadata.namespace,
        name: r.policy.metadata.name,
        spec: r.policy.spec,
      });
    world.engine.flush();
    const proof = prove(world, result.recommendations, observed.connections);
    const standard = values.standard === true;
    if (format === 'json') {
      out(
        JSON.stringify(
          {
            namespace,
            records: observed.records,
            policies: result.recommendations.map((r) => asWritten(r, standard)),
            workloads: result.recommendations.map((r) => ({
              workload: r.workload,
              policy: r.policy.metadata.name,
              pods: r.pods,
              connections: r.connections,
            })),
            proof,
            notes,
          },
          null,
          2,
        ),
      );
    } else {
      out(result.recommendations.map((r) => stringify(asWritten(r, standard))).join('---\n'));
      err(
        `${result.recommendations.length} polic${result.recommendations.length === 1 ? 'y' : 'ies'} for ${namespace} from ${observed.records} flow record(s), ${proof.connections} connection(s)`,
      );
      err(
        `proof: ${proof.allowed} of ${proof.connections} observed connection(s) allowed with the policies enforced${proof.refused.length ? '; NOT allowed:' : ''}`,
      );
      for (const r of proof.refused.slice(0, 20))
        err(`  ${r.from} -> ${r.to} ${r.protocol}/${r.port}: denied by ${r.decidedBy}`);
      if (proof.beyondCount) {
        err(`they also admit ${proof.beyondCount} pod pair(s) and port(s) not observed (DNS aside):`);
        for (const b of proof.beyond.slice(0, 20))
          err(`  ${b.from} -> ${b.to} ${b.protocol}/${b.port} (${b.policy})`);
        if (proof.beyondCount > 20)
          err(`  ... and ${proof.beyondCount - 20} more (-o json lists the first 1,000)`);
      } else err('they admit nothing beyond what was observed (DNS aside)');
      for (const n of notes) err(`note: ${n}`);
    }
    if (problems.length) return 2;
    return proof.refused.length ? 1 : 0;
  },
};
