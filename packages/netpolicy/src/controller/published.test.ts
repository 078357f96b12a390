// What the netpolicy-controller publishes, as plain functions: the rules per label set in decision
// order, names that carry no tenant text, bounds, the bucketed peer counts, and the conditions.
import { describe, expect, it } from 'vitest';
import { NetpolEngine } from '../engine/engine.ts';
import type { NetPolicyObject, Pod } from '../engine/model.ts';
import { shopCluster, shopPod } from '../engine/testing.ts';
import { MAX_PUBLISHED_RULES, networkEffectiveSpec, networkEffectives } from './published.ts';
import { networkPolicyConditions } from './published-conditions.ts';

const pod = shopPod;

function cluster(policies: NetPolicyObject[], pods: Pod[] = []): NetpolEngine {
  const e = NetpolEngine.fromCluster(
    shopCluster(policies, [
      pod('shop', 'web-1', { app: 'web' }, '10.0.0.1'),
      pod('shop', 'web-2', { app: 'web' }, '10.0.0.2'),
      pod('shop', 'cart', { app: 'cart' }, '10.0.0.3'),
      pod('dev', 'toy', { app: 'toy' }, '10.0.0.4'),
      ...pods,
    ]),
  );
  e.flush();
  return e;
}

const ANP = (name: string, priority: number, spec: Record<string, unknown> = {}): NetPolicyObject => ({
  kind: 'AdminNetworkPolicy',
  name,
  spec: {
    priority,
    subject: { namespaces: { matchLabels: { team: 'shop' } } },
    ingress: [{ name: 'deny-dev', action: 'Deny', from: [{ namespaces: { matchLabels: { env: 'dev' } } }] }],
    ...spec,
  },
});
const NP: NetPolicyObject = {
  kind: 'NetworkPolicy',
  namespace: 'shop',
  name: 'cart-from-web',
  spec: {
    podSelector: { matchLabels: { app: 'cart' } },
    policyTypes: ['Ingress'],
    ingress: [{ from: [{ podSelector: { matchLabels: { app: 'web' } } }], ports: [{ port: 'http' }] }],
  },
};
const BANP: NetPolicyObject = {
  kind: 'BaselineAdminNetworkPolicy',
  name: 'default',
  spec: {
    subject: { namespaces: {} },
    ingress: [{ name: 'deny-all', action: 'Deny', from: [{ namespaces: {} }] }],
  },
};

describe('networkEffectives', () => {
  it('one per namespace and label set, rules in decision order: admin, NetworkPolicy, isolation, baseline', () => {
    const e = cluster([ANP('dev-out', 20), NP, BANP]);
    const all = networkEffectives(e);
    expect(all.map((x) => `${x.namespace} ${JSON.stringify(x.labels)}`).sort()).toEqual([
      'dev {"app":"toy"}',
      'shop {"app":"cart"}',
      'shop {"app":"web"}',
    ]);
    const cart = all.find((x) => x.labels.app === 'cart')!;
    expect(cart.ingress.map((r) => `${r.tier} ${r.policy} ${r.rule} ${r.action}`)).toEqual([
      'admin AdminNetworkPolicy/dev-out deny-dev Deny',
      'networkpolicy NetworkPolicy/shop/cart-from-web ingress[0] Allow',
      'networkpolicy NetworkPolicy/shop/cart-from-web ingress isolation Deny',
      'baseline BaselineAdminNetworkPolicy/default deny-all Deny',
    ]);
    expect(cart.ingress[0]).toMatchObject({
      priority: 20,
      peers: [{ peer: 'namespaces {env=dev} pods {}' }],
    });
    expect(cart.ingress[1]!.ports).toEqual(['TCP/http']);
    expect(cart.egress).toEqual([]); // ingress-only policies
    expect(cart.sources.map((s) => `${s.kind}/${s.name}`)).toEqual([
      'AdminNetworkPolicy/dev-out',
      'BaselineAdminNetworkPolicy/default',
      'NetworkPolicy/cart-from-web',
    ]);
    // web-1 and web-2 are one label set; the toy in dev is not a subject of the shop ANP
    const toy = all.find((x) => x.labels.app === 'toy')!;
    expect(toy.ingress.map((r) => r.policy)).toEqual(['BaselineAdminNetworkPolicy/default']);
  });

  it('names carry no tenant text; long label sets are cut in the target text; long lists are cut and say so', () => {
    const labels: Record<string, string> = {};
    for (let i = 0; i < 40; i++) labels[`very-long-label-key-${i}`] = `value-${i}-${'x'.repeat(40)}`;
    const rules = Array.from({ length: MAX_PUBLISHED_RULES + 20 }, (_, i) => ({
      name: `r${i}`,
      action: 'Deny',
      from: [{ namespaces: { matchLabels: { env: `e${i}` } } }],
    }));
    const e = cluster(
      [
        ANP('big', 10, { ingress: rules.slice(0, 100) }),
        ANP('big2', 11, { ingress: rules.slice(100, 200) }),
        ANP('big3', 12, { ingress: rules.slice(100 + 100, 300) }),
        ANP('big4', 13, { ingress: rules.slice(300, 400) }),
        ANP('big5', 14, { ingress: rules.slice(400, 500) }),
        ANP('big6', 15, { ingress: rules.slice(500) }),
      ],
      [pod('shop', 'odd', labels, '10.0.0.9')],
    );
    const odd = networkEffectives(e).find((x) => x.labels['very-long-label-key-0'])!;
    expect(odd.name).toMatch(/^network-[0-9a-f]{20}$/);
    expect(odd.truncated).toEqual(['ingress']);
    expect(odd.ingress).toHaveLength(MAX_PUBLISHED_RULES);
    const spec = networkEffectiveSpec(odd) as {
      targetRef: { name: string };
      network: { truncated: string[] };
    };
    expect(spec.targetRef.name.length).toBeLessThanOrEqual(253);
    expect(spec.targetRef.name.endsWith('...')).toBe(true);
    expect(spec.network.truncated).toEqual(['ingress']);
  });

  it("selectsNone is said only of peers in the object's own namespace: no oracle on other namespaces", () => {
    // a tenant in dev guesses labels in shop, which it cannot read: whether shop has such pods must
    // not show in dev's EffectivePolicies (its pods in dev it can list anyway)
    const probe = (labels: Record<string, string>): NetPolicyObject => ({
      kind: 'NetworkPolicy',
      namespace: 'dev',
      name: 'probe',
      spec: {
        podSelector: {},
        ingress: [
          {
            from: [
              { namespaceSelector: { matchLabels: { team: 'shop' } }, podSelector: { matchLabels: labels } },
            ],
          },
          { from: [{ podSelector: { matchLabels: { app: 'nothing-here' } } }] },
        ],
      },
    });
    const peersOf = (labels: Record<string, string>) =>
      networkEffectives(cluster([probe(labels)]))
        .find((x) => x.namespace === 'dev')!
        .ingress.map((r) => r.peers);
    const exists = peersOf({ app: 'cart' });
    const absent = peersOf({ app: 'guess' });
    // the answer for the other namespace is the same whether the guess is right or not
    expect(exists[0]).toEqual([{ peer: 'namespaces {team=shop} pods {app=cart}' }]);
    expect(absent[0]).toEqual([{ peer: 'namespaces {team=shop} pods {app=guess}' }]);
    // its own namespace: said
    expect(absent[1]).toEqual([{ peer: 'namespaces dev pods {app=nothing-here}', selectsNone: true }]);
    // an admin rule whose peer names one namespace: said on that namespace's objects only
    const anp = ANP('one-ns', 5, {
      subject: { namespaces: {} },
      ingress: [
        {
          name: 'from-shop-ghost',
          action: 'Deny',
          from: [
            {
              pods: {
                namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'shop' } },
                podSelector: { matchLabels: { app: 'ghost' } },
              },
            },
          ],
        },
      ],
    });
    const all = networkEffectives(cluster([anp]));
    const dev = all.find((x) => x.namespace === 'dev')!.ingress[0]!.peers;
    expect(dev[0]!.selectsNone).toBeUndefined();
  });

  it('a peer that selects no pod says so; a new label set elsewhere rewrites only its own object', () => {
    const typo: NetPolicyObject = {
      kind: 'NetworkPolicy',
      namespace: 'shop',
      name: 'typo',
      spec: {
        podSelector: { matchLabels: { app: 'cart' } },
        ingress: [{ from: [{ podSelector: { matchLabels: { app: 'wbe' } } }] }],
      },
    };
    const cart = networkEffectives(cluster([typo])).find((x) => x.labels.app === 'cart')!;
    expect(cart.ingress[0]!.peers).toEqual([{ peer: 'namespaces shop pods {app=wbe}', selectsNone: true }]);
    const extra = (n: number) =>
      Array.from({ length: n }, (_, i) => pod('dev', `t${i}`, { app: `t${i}` }, `10.0.1.${i + 1}`));
    const spec = (x: ReturnType<typeof networkEffectives>) =>
      new Map(x.map((e) => [e.name, JSON.stringify(networkEffectiveSpec(e))]));
    // 1 to 30 extra label sets in dev: every existing object stays the same, whatever the count
    const before = spec(networkEffectives(cluster([ANP('dev-out', 20), NP, BANP], extra(1))));
    const after = spec(networkEffectives(cluster([ANP('dev-out', 20), NP, BANP], extra(30))));
    const changed = [...before].filter(([k, v]) => after.get(k) !== v);
    expect(changed).toEqual([]);
    expect(after.size - before.size).toBe(29);
  });
});

describe('the same objects whatever order the policies arrived in', () => {
  it('a controller that listed them in another order (a restart, a new leader) publishes identical specs', () => {
    const more: NetPolicyObject[] = ['a', 'c', 'b'].map((n) => ({
      kind: 'NetworkPolicy',
      namespace: 'shop',
      name: `cart-${n}`,
      spec: {
        podSelector: { matchLabels: { app: 'cart' } },
        ingress: [{ from: [{ podSelector: { matchLabels: { app: n } } }] }],
      },
    }));
    const policies = [ANP('dev-out', 20), NP, BANP, ...more];
    const spec = (ps: NetPolicyObject[]) =>
      networkEffectives(cluster(ps)).map((e) => JSON.stringify(networkEffectiveSpec(e)));
    const forward = spec(policies);
    expect(spec([...policies].reverse())).toEqual(forward);
    expect(spec([more[2]!, NP, more[0]!, BANP, more[1]!, ANP('dev-out', 20)])).toEqual(forward);
  });
});

describe('networkPolicyConditions', () => {
  it('Accepted or Invalid, what it selects, equal-priority overlaps on both policies', () => {
    const e = cluster([
      ANP('a', 20),
      ANP('b', 20),
      ANP('nothing', 30, { subject: { namespaces: { matchLabels: { team: 'nobody' } } } }),
      ANP('bad', 40, {
        subject: {
          pods: {
            namespaceSelector: {},
            podSelector: { matchExpressions: [{ key: 'x', operator: 'Bogus' }] },
          },
        },
      }),
    ]);
    const c = networkPolicyConditions(e);
    const get = (p: string, t: string) => c.get(p)?.find((x) => x.type === t);
    expect(get('AdminNetworkPolicy/a', 'Accepted')).toMatchObject({ status: 'True' });
    expect(get('AdminNetworkPolicy/a', 'Selecting')).toMatchObject({
      status: 'True',
      message: 'selects pods of 2 label sets in 1 namespace',
    });
    expect(get('AdminNetworkPolicy/a', 'Overlapping')).toMatchObject({
      status: 'True',
      reason: 'SamePriority',
    });
    expect(get('AdminNetworkPolicy/b', 'Overlapping')).toMatchObject({
      status: 'True',
      reason: 'SamePriority',
    });
    expect(get('AdminNetworkPolicy/nothing', 'Selecting')).toMatchObject({
      status: 'False',
      reason: 'NoPods',
    });
    expect(get('AdminNetworkPolicy/bad', 'Accepted')).toMatchObject({ status: 'False', reason: 'Invalid' });
    expect(get('AdminNetworkPolicy/bad', 'Accepted')!.message).toMatch(
      /spec\.subject\.pods\.podSelector\.matchExpressions\[0\]/,
    );
  });
});
