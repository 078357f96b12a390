// Connections across a datapath upgrade: the agent is rolled to an image carrying the previous
// datapath (the LRU-hash conntrack of commit LRU_DATAPATH, built from git: prebuilt.ts), connections are
// opened under it, and the agent is rolled back to this build, whose load copies the older conntrack
// into the set-associative table (bpf-datapath README "Upgrades"). Each connection's server may open
// nothing (egress denied) and sends a byte every 100 ms: a lost conntrack entry stops it for good.
import { expect } from 'vitest';
import { stringify } from 'yaml';
import { kubectl, kubectlJson, sh, shAsync, until } from '../harness.ts';
import { LRU_TAG, olderDatapathImage } from './prebuilt.ts';
import { figures, NS, probePod } from './shared.ts';

const CT_NS = 'e2e-conntrack';
const TICK_PORT = 9100;
const HOLDS = 4;
/** how long the holds run before the roll, so that every one is open under the previous datapath */
const BEFORE_ROLL_MS = 10_000;
/**
 * How long a connection is held across the roll back to this build: past the roll by at least 15 s
 * (asserted), sized from the downgrade's roll measured just before (6-7 s here) so that a machine
 * several times slower holds longer rather than failing, and a fast one waits no minute for nothing.
 */
const holdMs = (downgradeRollMs: number) =>
  Math.min(180_000, Math.max(35_000, BEFORE_ROLL_MS + 2 * downgradeRollMs + 25_000));

type Ds = {
  spec: {
    template: {
      spec: { containers: { name: string; image: string }[]; initContainers?: { name: string }[] };
    };
  };
};

/** Rolls the agent DaemonSet to `image` (its containers and its CNI init container) and waits. */
function rollAgent(image: string): void {
  const ds = kubectlJson<Ds>('get', 'ds', '-n', NS, 'netpolicy-agent');
  const names = [...ds.spec.template.spec.containers, ...(ds.spec.template.spec.initContainers ?? [])].map(
    (c) => c.name,
  );
  kubectl('set', 'image', '-n', NS, 'ds/netpolicy-agent', ...names.map((n) => `${n}=${image}`));
  sh('kubectl', ['rollout', 'status', '-n', NS, 'ds/netpolicy-agent', '--timeout=180s'], {
    timeoutMs: 200_000,
  });
}

const agentLog = () => kubectl('logs', '-n', NS, 'ds/netpolicy-agent', '--tail=-1');

/** connections held across an agent upgrade from the LRU-hash conntrack to the set-associative table: none reset, none stalled */
export async function conntrackAcrossDatapathUpgrade(): Promise<void> {
  const current = kubectlJson<Ds>('get', 'ds', '-n', NS, 'netpolicy-agent').spec.template.spec.containers[0]!
    .image;
  const older = `${current.split(':')[0]}:${LRU_TAG}`;
  // built and imported in the background since the install step (prebuilt.ts): its build's seconds,
  // and how long this step still waited for it
  const t0 = Date.now();
  figures.conntrackUpgradeOlderImageSeconds = await olderDatapathImage();
  figures.conntrackUpgradeOlderImageWaitSeconds = (Date.now() - t0) / 1000;

  // a server that may open nothing and a client that may open only to it
  const server = probePod(CT_NS, 'ct-server', { app: 'ct-server' });
  server.spec.containers[0]!.args = ['serve', '8080', `tick:${TICK_PORT}`];
  const client = probePod(CT_NS, 'ct-client', { app: 'ct-client' });
  const policy = (name: string, app: string, rule: Record<string, unknown>) => ({
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name, namespace: CT_NS },
    spec: { podSelector: { matchLabels: { app } }, policyTypes: ['Ingress', 'Egress'], ...rule },
  });
  sh('kubectl', ['apply', '-f', '-'], {
    input: [
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: CT_NS } },
      server,
      client,
      policy('server', 'ct-server', {
        ingress: [
          { from: [{ podSelector: { matchLabels: { app: 'ct-client' } } }], ports: [{ port: TICK_PORT }] },
        ],
      }),
      policy('client', 'ct-client', {
        egress: [
          { to: [{ podSelector: { matchLabels: { app: 'ct-server' } } }], ports: [{ port: TICK_PORT }] },
        ],
      }),
    ]
      .map((o) => `---\n${stringify(o)}`)
      .join(''),
  });
  try {
    kubectl('wait', '-n', CT_NS, '--for=condition=Ready', 'pod', '--all', '--timeout=120s');
    const serverIp = kubectlJson<{ status: { podIP: string } }>('get', 'pod', '-n', CT_NS, 'ct-server').status
      .podIP;
    const holdArgs = (ms: number) => [
      ...['exec', '-n', CT_NS, 'ct-client', '--'],
      ...['cascade-probe', 'hold', serverIp, String(TICK_PORT), String(ms)],
    ];
    const hold = (ms: number) => sh('kubectl', holdArgs(ms), { timeoutMs: ms + 30_000 });
    /** a hold's line, also when it failed (it exits 1) */
    const holdAsync = (ms: number) =>
      shAsync('kubectl', holdArgs(ms), ms + 60_000).then(
        (out) => out.trim(),
        (e: Error & { stdout?: string }) => (e.stdout ?? e.message).trim(),
      );

    // the previous datapath on the node: its load replaces the table, so a downgrade loses conntrack
    // once (bpf-datapath README "Upgrades"): a connection held across it stops (which also shows a
    // held connection notices a lost entry)
    await until('a connection under this datapath', 120, () =>
      /^HOLD \d+/.test(hold(1500)) ? true : undefined,
    );
    const acrossDowngrade = holdAsync(60_000);
    await new Promise((r) => setTimeout(r, 5_000));
    const downgradeAt = Date.now();
    rollAgent(older);
    const downgradeRollMs = Date.now() - downgradeAt;
    const lost = await acrossDowngrade;
    figures.conntrackDowngradeConnectionLost = lost.startsWith('HOLD-FAILED') ? 1 : 0;
    expect(lost).toMatch(/^HOLD-FAILED silent-10s/);
    await until('a connection under the previous datapath', 120, () =>
      /^HOLD \d+/.test(hold(1500)) ? true : undefined,
    );
    // and the server's own new flows are refused: only conntrack carries its ticks (the probe says
    // DENY and exits 1)
    const clientIp = kubectlJson<{ status: { podIP: string } }>('get', 'pod', '-n', CT_NS, 'ct-client').status
      .podIP;
    const refused = await shAsync(
      'kubectl',
      ['exec', '-n', CT_NS, 'ct-server', '--', 'cascade-probe', 'probe', 'tcp', clientIp, '8080', '1000'],
      30_000,
    ).then(
      (out) => out.trim(),
      (e: Error & { stdout?: string }) => (e.stdout ?? e.message).trim(),
    );
    expect(refused).toBe('DENY');

    // connections opened under it, held across the roll back to this build
    const holdFor = holdMs(downgradeRollMs);
    figures.conntrackUpgradeHoldSeconds = holdFor / 1000;
    const heldAt = Date.now();
    const held = Array.from({ length: HOLDS }, () => holdAsync(holdFor));
    await new Promise((r) => setTimeout(r, BEFORE_ROLL_MS));
    const upgradeAt = Date.now();
    rollAgent(current);
    figures.conntrackUpgradeRollSeconds = (Date.now() - upgradeAt) / 1000;
    // the connections must outlive the roll by a while, or they prove nothing about the new datapath
    const after = holdFor - (Date.now() - heldAt);
    figures.conntrackUpgradeHeldAfterRollSeconds = after / 1000;
    expect(
      after,
      'the holds end at least 15 s after the roll (this roll took much longer than the downgrade)',
    ).toBeGreaterThan(15_000);
    const results = await Promise.all(held);
    const parsed = results.map((r) => /^HOLD (\d+) (\d+) (\d+)$/.exec(r));
    figures.conntrackUpgradeConnections = HOLDS;
    figures.conntrackUpgradeConnectionsKept = parsed.filter(Boolean).length;
    figures.conntrackUpgradeMaxGapMs = Math.max(...parsed.map((m) => (m ? Number(m[2]) : Number.NaN)));
    figures.conntrackUpgradeRetransmits = parsed.reduce((s, m) => s + (m ? Number(m[3]) : 0), 0);
    // every connection kept: none reset, closed or silent for 10 s; and no tick late by more than a
    // few hundred ms (a lost entry would stop them for good)
    expect(
      results.filter((_r, i) => !parsed[i]),
      'connections that failed',
    ).toEqual([]);
    expect(figures.conntrackUpgradeMaxGapMs).toBeLessThan(2000);
    // the new agent migrated the older conntrack (at load, then after attaching)
    const log = agentLog();
    const migrated = /conntrack migrated from the older layout[^\n]*"atLoad":(\d+)[^\n]*"late":(\d+)/.exec(
      log,
    );
    expect(migrated, 'the agent logs its migration').not.toBeNull();
    figures.conntrackUpgradeMigratedAtLoad = Number(migrated![1]);
    figures.conntrackUpgradeMigratedLate = Number(migrated![2]);
    expect(figures.conntrackUpgradeMigratedAtLoad).toBeGreaterThanOrEqual(HOLDS);
  } finally {
    kubectl('delete', 'namespace', CT_NS, '--wait=false');
  }
}
