// Running a command in a node's netpolicy-agent container through the API server's pods/exec (as
// cilium-dbg is run): how `cascadectl flows --node` and `netpol maps --node` read what only the node
// knows (its loopback flow stream, its pinned maps). Cluster admins: `create pods/exec` in the agent's
// namespace.
import { Writable } from 'node:stream';
import { errorText } from '@cascade/core/kube';
import type { KubeConfig } from '@kubernetes/client-node';
import { UsageError } from './cli.ts';
import { clientFor, liveOptions } from './cluster.ts';

/** The label the chart gives the agent's pods (charts/cascade/templates/agent.yaml). */
export const AGENT_LABEL = 'app.kubernetes.io/name=netpolicy-agent';

/**
 * Runs COMMAND in the agent container through pods/exec and hands its standard output over line by
 * line; resolves when it ends with success, rejects with its standard error (or status) otherwise.
 */
export async function execLines(
  kc: KubeConfig,
  pod: { name: string; namespace: string },
  command: string[],
  onLines: (lines: string[]) => void,
): Promise<void> {
  const { Exec } = await import('@kubernetes/client-node');
  let buf = '';
  let err = '';
  const stdout = new Writable({
    write(chunk, _enc, done) {
      buf += String(chunk);
      const lines = buf.split('\n');
      buf = lines.pop() ?? '';
      if (lines.length) onLines(lines);
      done();
    },
  });
  const stderr = new Writable({
    write(chunk, _enc, done) {
      if (err.length < 4096) err += String(chunk);
      done();
    },
  });
  await new Promise<void>((resolve, reject) => {
    let status: { status?: string; message?: string } | undefined;
    const finish = () => {
      if (buf.trim()) onLines([buf]);
      buf = '';
      if (status?.status === 'Success') resolve();
      else reject(new Error(err.trim() || status?.message || 'the exec stream ended without a status'));
    };
    new Exec(kc)
      .exec(pod.namespace, pod.name, 'agent', command, stdout, stderr, null, false, (s) => {
        status = s;
      })
      .then((ws) => ws.on('close', finish), reject);
  });
}

/**
 * The agent pod on `node` and a way to run a command in it, from the live-cluster flags; `what`
 * names the reading in errors ("the flows", "the maps"). Errors are one line (who may exec, what the
 * API server or the agent said).
 */
export async function onAgent(
  flag: string,
  node: string,
  what: string,
): Promise<{ where: string; run: (command: string[], onLines: (lines: string[]) => void) => Promise<void> }> {
  const live = liveOptions();
  if (!live)
    throw new UsageError(
      `${flag} reads through the API server: give --kubeconfig PATH and/or --context NAME`,
    );
  const client = await clientFor(live);
  const pods = await client.request<{
    items: { metadata: { name: string; namespace: string }; status?: { phase?: string } }[];
  }>(
    'GET',
    `/api/v1/pods?labelSelector=${encodeURIComponent(AGENT_LABEL)}&fieldSelector=${encodeURIComponent(`spec.nodeName=${node}`)}`,
  );
  const agent = pods.items.find((p) => p.status?.phase === 'Running') ?? pods.items[0];
  if (!agent) throw new UsageError(`no netpolicy-agent pod (label ${AGENT_LABEL}) on node ${node}`);
  const where = `${agent.metadata.namespace}/${agent.metadata.name}`;
  return {
    where,
    run: (command, onLines) =>
      execLines(client.kc, agent.metadata, command, onLines).catch((e: unknown) => {
        const msg = errorText(e).split('\n')[0]!.slice(0, 300);
        throw new UsageError(
          `${flag} ${node}: cannot read ${what} of the agent ${where} through pods/exec: ${msg}${/\b403\b|forbidden/i.test(msg) ? ` (it needs create pods/exec in ${agent.metadata.namespace})` : ''}`,
        );
      }),
  };
}
