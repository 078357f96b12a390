// netpol simulate --staged: the staged set judged beside the enforced one. The staged verdicts must be
// exactly the verdicts of the same files with each staged action done for real (a Set written as the
// standard kind, a Delete's policy removed); bad staged objects are named and leave the others working.
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { run } from './run.ts';

const NP = resolve(import.meta.dirname, '../../../examples/netpol');
const tmp = mkdtempSync(join(tmpdir(), 'cascadectl-staged-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const STAGED = `apiVersion: cascade.dev/v1alpha1
kind: StagedNetworkPolicy
metadata: { name: default-deny, namespace: sandbox }
spec:
  podSelector: {}
  policyTypes: [Ingress]
---
apiVersion: cascade.dev/v1alpha1
kind: StagedNetworkPolicy
metadata: { name: ledger-metrics, namespace: payments }
spec:
  stagedAction: Delete
---
apiVersion: cascade.dev/v1alpha1
kind: StagedAdminNetworkPolicy
metadata: { name: no-ledger-egress }
spec:
  priority: 5
  subject: { namespaces: { matchLabels: { kubernetes.io/metadata.name: payments } } }
  egress:
    - { name: deny-all, action: Deny, to: [{ networks: [0.0.0.0/0] }] }
`;
// the same changes made for real
const REAL = `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: { name: default-deny, namespace: sandbox }
spec:
  podSelector: {}
  policyTypes: [Ingress]
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: { name: no-ledger-egress }
spec:
  priority: 5
  subject: { namespaces: { matchLabels: { kubernetes.io/metadata.name: payments } } }
  egress:
    - { name: deny-all, action: Deny, to: [{ networks: [0.0.0.0/0] }] }
`;

function dir(name: string, extra: Record<string, string>, drop?: (text: string) => string): string {
  const d = join(tmp, name);
  cpSync(NP, d, { recursive: true });
  if (drop) {
    const f = join(d, '20-namespaces.yaml');
    writeFileSync(f, drop(readFileSync(f, 'utf8')));
  }
  for (const [f, text] of Object.entries(extra)) writeFileSync(join(d, f), text);
  return d;
}
const staged = dir('staged', { '30-staged.yaml': STAGED });
// ledger-metrics deleted for real: its document removed
const real = dir('real', { '30-real.yaml': REAL }, (t) =>
  t
    .split(/^---$/m)
    .filter((doc) => !doc.includes('name: ledger-metrics,'))
    .join('---'),
);

type Table = {
  port: string;
  rows: string[][];
  changes: { from: string; to: string; enforced: string; staged: string }[];
};

describe('netpol simulate --staged', () => {
  it('judges exactly as the same changes made for real, and lists every change', async () => {
    const s = await run('netpol', 'simulate', staged, '--staged', '-o', 'json');
    expect(s.code).toBe(0);
    const r = await run('netpol', 'simulate', real, '-o', 'json');
    const e = await run('netpol', 'simulate', NP, '-o', 'json');
    expect(r.code).toBe(0);
    const stagedTables = JSON.parse(s.stdout) as Table[];
    const realTables = JSON.parse(r.stdout) as Table[];
    const enforced = JSON.parse(e.stdout) as Table[];
    // the staged view's cells, + and - read as what they would become, are the real tables'
    const asVerdicts = (t: Table) =>
      t.rows.map((row) => row.map((c) => (c === '+' ? '.' : c === '-' ? 'X' : c)));
    // the staged view has the ports in use in either set (9090 stays: the enforced set names it)
    expect(stagedTables.map((t) => t.port)).toEqual(expect.arrayContaining(realTables.map((t) => t.port)));
    for (const t of realTables)
      expect(asVerdicts(stagedTables.find((x) => x.port === t.port)!)).toEqual(t.rows);
    // each change is a cell where the enforced table differs, and nothing else differs
    let changed = 0;
    for (const t of stagedTables) {
      const before = enforced.find((x) => x.port === t.port);
      t.rows.forEach((row, i) =>
        row.forEach((c, j) => {
          if (i === 0 || j === 0) return;
          const was = before ? before.rows[i]![j] : '.';
          if (c === '+' || c === '-') {
            changed++;
            expect(was).toBe(c === '+' ? 'X' : '.');
            expect(t.changes).toContainEqual(
              expect.objectContaining({
                from: row[0],
                to: t.rows[0]![j],
                enforced: c === '+' ? 'deny' : 'allow',
              }),
            );
          } else expect(c).toBe(was);
        }),
      );
      expect(t.changes.length).toBe(t.rows.flat().filter((c) => c === '+' || c === '-').length);
    }
    expect(changed).toBeGreaterThan(10);
  });

  it('names the staged rule that decides, and puts the staged verdict beside each probe', async () => {
    const t = await run('netpol', 'simulate', staged, '--staged');
    expect(t.stdout).toMatch(
      /monitoring\/prometheus -> sandbox\/toy +TCP\/443 +allow -> DENY +ingress: networkpolicy StagedNetworkPolicy sandbox\/default-deny isolation/,
    );
    expect(t.stdout).toMatch(
      /payments\/ledger -> monitoring\/prometheus +TCP\/443 +allow -> DENY +egress: admin StagedAdminNetworkPolicy no-ledger-egress deny-all/,
    );
    const probes = join(tmp, 'probes.yaml');
    writeFileSync(
      probes,
      '- {from: shop/web, to: sandbox/toy, protocol: TCP, port: 443}\n- {from: shop/web, to: shop/cart, protocol: TCP, port: 8080}\n',
    );
    const p = await run('netpol', 'simulate', staged, '--staged', '--probes', probes);
    expect(p.stdout).toMatch(
      /shop\/web +sandbox\/toy +TCP\/443 +ALLOW +DENY \(ingress: networkpolicy StagedNetworkPolicy sandbox\/default-deny isolation\)/,
    );
    expect(p.stdout).toMatch(/shop\/web +shop\/cart +TCP\/8080 +DENY +=/);
    const j = await run('netpol', 'simulate', staged, '--staged', '--probes', probes, '-o', 'json');
    const items = JSON.parse(j.stdout) as {
      verdict: string;
      staged: { verdict: string; ingress?: { decidedBy: { policy?: string } } };
    }[];
    expect(items.map((i) => [i.verdict, i.staged.verdict])).toEqual([
      ['allow', 'deny'],
      ['deny', 'deny'],
    ]);
    expect(items[0]!.staged.ingress?.decidedBy.policy).toBe('NetworkPolicy/sandbox/default-deny');
  });

  it('without --staged, staged objects change nothing', async () => {
    const a = await run('netpol', 'simulate', staged, '-o', 'json');
    const b = await run('netpol', 'simulate', NP, '-o', 'json');
    expect(a.code).toBe(0);
    expect(a.stdout).toBe(b.stdout);
  });

  it('names a bad staged object and its field; the others still apply', async () => {
    const bad = dir('bad', {
      '30-staged.yaml': `${STAGED}---
apiVersion: cascade.dev/v1alpha1
kind: StagedNetworkPolicy
metadata: { name: maybe, namespace: shop }
spec: { stagedAction: Maybe }
---
apiVersion: cascade.dev/v1alpha1
kind: StagedNetworkPolicy
metadata: { name: not-there, namespace: shop }
spec: { stagedAction: Delete }
---
apiVersion: cascade.dev/v1beta9
kind: StagedClusterNetworkPolicy
metadata: { name: wrong-version }
spec: {}
---
apiVersion: cascade.dev/v1alpha1
kind: StagedNetworkPolicy
metadata: { name: bad-cidr, namespace: payments }
spec:
  podSelector: {}
  ingress: [{ from: [{ ipBlock: { cidr: 10.0.0.0/33 } }] }]
`,
    });
    const r = await run('netpol', 'simulate', bad, '--staged', '-o', 'json');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /document 4 \(StagedNetworkPolicy shop\/maybe\): spec\.stagedAction: "Maybe" is not Set or Delete/,
    );
    expect(r.stderr).toMatch(
      /\(StagedNetworkPolicy shop\/not-there\): spec\.stagedAction: Delete: there is no NetworkPolicy shop\/not-there to delete/,
    );
    expect(r.stderr).toMatch(
      /\(StagedClusterNetworkPolicy wrong-version\): apiVersion: "cascade.dev\/v1beta9" is not cascade.dev\/v1alpha1/,
    );
    // refused as the standard kind refuses it, and fails closed as the standard kind does
    expect(r.stderr).toMatch(
      /\(StagedNetworkPolicy payments\/bad-cidr\) \[staged\]: spec\.ingress\[0\]\.from\[0\]\.ipBlock: "10.0.0.0\/33" is not a valid CIDR/,
    );
    const t = JSON.parse(r.stdout) as Table[];
    expect(t.flatMap((x) => x.changes).some((c) => c.to === 'sandbox/toy')).toBe(true);
    // lint says of staged objects what their status would: refused (exit 1), a Delete of nothing
    const l = await run('lint', bad, '-o', 'json');
    expect(l.code).toBe(2); // the unreadable staged objects above
    const findings = JSON.parse(l.stdout) as { severity: string; object: string; message: string }[];
    expect(findings).toContainEqual({
      severity: 'error',
      kind: 'StagedNetworkPolicy',
      object: 'StagedNetworkPolicy payments/bad-cidr',
      namespace: 'payments',
      message: expect.stringMatching(
        /^NetworkPolicy payments\/bad-cidr would be refused: spec\.ingress\[0\]\.from\[0\]\.ipBlock: "10\.0\.0\.0\/33" is not a valid CIDR/,
      ),
    });
    expect(findings).toContainEqual({
      severity: 'warning',
      kind: 'StagedNetworkPolicy',
      object: 'StagedNetworkPolicy shop/not-there',
      namespace: 'shop',
      message: 'there is no NetworkPolicy shop/not-there to delete',
    });
  });

  it('says so when there is nothing staged', async () => {
    const r = await run('netpol', 'simulate', NP, '--staged');
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/no Staged\* policy in these files/);
    expect(r.stdout).toMatch(/the staged policies change no verdict here/);
  });
});
