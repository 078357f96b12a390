// What the end-to-end steps share: the release namespace, the figures written at the end, a scratch
// directory, helm and the install, the example objects, and what the network-policy steps learn
// about the example's pods for the later steps.
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { CLUSTER_SH, ROOT, sh } from '../harness.ts';

export const NS = 'cascade-system';
/** Figures of the run, written to tools/cluster/.local/e2e-figures.json. */
export const figures: Record<string, number | string> = {};
export const work = mkdtempSync(join(tmpdir(), 'cascade-e2e-'));
export const helm = (...args: string[]) => sh('helm', args, { timeoutMs: 300_000 });
/** helm install, or upgrade, with this cluster's settings (cluster.sh install: one place for them) */
export const install = (tag: string) =>
  sh('bash', [CLUSTER_SH, 'install', tag, '6m'], { timeoutMs: 420_000 });

/** How many host veths carry the Cascade program at tc ingress. */
export function attachedPrograms(): number {
  const veths = JSON.parse(sh('ip', ['-j', 'link', 'show', 'type', 'veth'])) as { ifname: string }[];
  return veths.filter((v) =>
    sh('tc', ['filter', 'show', 'dev', v.ifname, 'ingress']).includes('from_endpoint'),
  ).length;
}

export type Obj = {
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec?: { containers?: { name?: string; ports?: unknown[] }[]; [field: string]: unknown };
};
/** The objects of a YAML file of the repository (Lists unpacked). */
export const docs = (file: string): Obj[] =>
  parseAllDocuments(readFileSync(join(ROOT, file), 'utf8')).flatMap((d) => {
    const v = d.toJS() as Obj & { items?: Obj[] };
    return v?.kind === 'List' ? (v.items ?? []) : v ? [v] : [];
  });

/** The host port the node-side probe server listens on. */
export const NODE_PORT = 19_191;
/** What the network-policy steps set up and the later steps use. */
export const net = {
  nodeIp: '',
  nodeServer: undefined as ChildProcess | undefined,
  exampleNamespaces: [] as string[],
  pods: [] as Obj[],
  ports: [] as number[],
  podIp: new Map<string, string>(),
};

/** A probe-image pod serving 8080 (named http), unprivileged; pinned to `node` when given. */
export const probePod = (ns: string, name: string, labels: Record<string, string>, node?: string) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: ns, labels },
  spec: {
    ...(node ? { nodeName: node } : {}),
    terminationGracePeriodSeconds: 1,
    securityContext: { runAsNonRoot: true, runAsUser: 65532 },
    containers: [
      {
        name: 'app',
        image: 'cascade.local/cascade-probe:cluster',
        imagePullPolicy: 'Never',
        args: ['serve', '8080'],
        ports: [{ name: 'http', containerPort: 8080 }],
        securityContext: {
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ['ALL'] },
        },
      },
    ],
  },
});
