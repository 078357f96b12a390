// A ClusterNetworkPolicy network with host bits set: network-policy-api v0.2.0's CRD accepted it, v0.3's
// v1beta1 refuses it, and objects stored before an upgrade stay. It keeps the verdicts it always had
// (enforced as its network) and says what to write.
import { describe, expect, it } from 'vitest';
import { buildPolicy } from './rules.ts';

const cnp = (networks: string[]) => ({
  kind: 'ClusterNetworkPolicy' as const,
  name: 'egress-out',
  spec: {
    tier: 'Admin',
    priority: 5,
    subject: { namespaces: {} },
    egress: [{ action: 'Deny', to: [{ networks }] }],
  },
});

describe('ClusterNetworkPolicy networks with host bits set', () => {
  it('is enforced as its network, as before, with a warning naming the field and what to write', () => {
    const b = buildPolicy(cnp(['10.1.2.3/8', '192.168.0.0/16', '2001:db8::1/32']));
    expect(b.errors).toEqual([]);
    expect(b.warnings).toEqual([
      'spec.egress[0].to[0].networks[0]: "10.1.2.3/8" has host bits set, which ClusterNetworkPolicy v1beta1 refuses (network-policy-api v0.2.1 and later); enforced as 10.0.0.0/8: write that',
      'spec.egress[0].to[0].networks[2]: "2001:db8::1/32" has host bits set, which ClusterNetworkPolicy v1beta1 refuses (network-policy-api v0.2.1 and later); enforced as 2001:db8::/32: write that',
    ]);
    const same = buildPolicy(cnp(['10.0.0.0/8', '192.168.0.0/16', '2001:db8::/32']));
    expect(b.rules.map((r) => r.peers)).toEqual(
      same.rules.map((r) => r.peers.map((p) => ({ ...p, text: expect.any(String) }))),
    );
  });

  it('a canonical network, and an AdminNetworkPolicy (v1alpha1 never refused it), get no warning', () => {
    expect(buildPolicy(cnp(['10.0.0.0/8', '10.1.2.3/32', '::/0'])).warnings).toEqual([]);
    const anp = buildPolicy({
      kind: 'AdminNetworkPolicy',
      name: 'a',
      spec: {
        priority: 5,
        subject: { namespaces: {} },
        egress: [{ action: 'Deny', to: [{ networks: ['10.1.2.3/8'] }] }],
      },
    });
    expect([anp.errors, anp.warnings]).toEqual([[], []]);
  });
});
