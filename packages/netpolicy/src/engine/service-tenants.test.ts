// Tenants against a node's Service maps, round three: one owner's many early-named namespaces, each
// inside its budget, filled the node's frontends and pushed out an older namespace's ClusterIPs.
import { describe, expect, it } from 'vitest';
import { ServiceCatalog } from './services.ts';
import { DEFAULT_TENANT_LABEL, tenantOf } from './tenants.ts';

const ts = (i: number) => new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString();
/** A ClusterIP Service of `ports` TCP ports, created at `created`. */
const service = (namespace: string, name: string, ip: string, ports: number, created: string) => ({
  metadata: { name, namespace, creationTimestamp: created },
  spec: {
    clusterIP: ip,
    clusterIPs: [ip],
    ports: Array.from({ length: ports }, (_, i) => ({ name: `p${i}`, port: 1000 + i, protocol: 'TCP' })),
  },
});

/** payments/ledger (older than everything else) and 17 early-named namespaces of one owner. */
function node(labelled: boolean) {
  // a node that holds 100 frontends; 20 per tenant
  const c = new ServiceCatalog(
    { frontends: 20, backends: 1000, reserved: ['kube-system'] },
    {
      frontends: 100,
      backends: 10_000,
    },
  );
  c.apply('Service', service('payments', 'ledger', '10.96.9.9', 2, ts(0)));
  for (let n = 0; n < 17; n++)
    for (let s = 0; s < 2; s++)
      c.apply(
        'Service',
        service(`aa${String(n).padStart(2, '0')}`, `s${s}`, `10.96.${n}.${s + 1}`, 10, ts(100 + n)),
      );
  const labels = (ns: string): Record<string, string> =>
    labelled && ns.startsWith('aa') ? { [DEFAULT_TENANT_LABEL]: 'mallory' } : {};
  c.setTenants((ns) => tenantOf(ns, labels(ns)));
  return c;
}

describe("a node's Service maps across namespaces (round three)", () => {
  it('what was admitted before is never pushed out: the oldest Services are served first, whatever their names', () => {
    const c = node(false);
    // 17 namespaces x 20 frontends, each inside its own budget: the maps fill, the newest are refused
    expect(c.untranslated()).not.toContain('10.96.9.9');
    expect(c.frontends().filter((f) => f.key === 'payments/ledger')).toHaveLength(2);
    const refused = c.refused();
    expect(refused.every((r) => r.namespace.startsWith('aa'))).toBe(true);
    expect(refused[0]!.reason).toMatch(/the node's Service maps are full/);
    // the refused are the newest (the namespaces created last), never an older one's: 98 frontends
    // left after the ledger hold aa00-aa03 and aa04's first Service
    expect(refused.map((r) => r.service)).toEqual([
      'aa04/s1',
      ...Array.from({ length: 12 }, (_, n) => [
        `aa${String(n + 5).padStart(2, '0')}/s0`,
        `aa${String(n + 5).padStart(2, '0')}/s1`,
      ]).flat(),
    ]);
  });

  it("one owner's namespaces labelled as one tenant share one budget: the node keeps room for others", () => {
    const c = node(true);
    const refused = c.refused();
    // 20 frontends for the whole tenant: its first two Services (aa00), the 32 others refused
    expect(refused).toHaveLength(32);
    expect(refused[0]!.reason).toMatch(
      /^tenant cascade\.dev\/tenant=mallory is over its Service budget on this node \(20 frontends/,
    );
    expect(c.untranslated()).not.toContain('10.96.9.9');
    expect(c.untranslated()).not.toContain('10.96.0.1');
  });
});
