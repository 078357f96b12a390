import { describe, expect, it } from 'vitest';
import { standardTopology } from '../testing/index.ts';
import { Topology } from './topology.ts';
import type { GatewayObject, RouteObject } from './types.ts';

function standard(): Topology {
  const t = new Topology();
  const s = standardTopology();
  for (const g of s.gateways) t.upsertGateway(g);
  for (const r of s.routes) t.upsertRoute(r);
  return t;
}

describe('topology paths', () => {
  it('builds one path per (listener, rule) that the route attaches to', () => {
    const t = standard();
    expect([...t.paths.keys()].sort()).toEqual([
      'Gateway:infra/gw#admin|HTTPRoute:app/r3#rule-1',
      'Gateway:infra/gw#http|HTTPRoute:app/r1#read',
      'Gateway:infra/gw#http|HTTPRoute:app/r1#rule-2',
      'Gateway:infra/gw#http|HTTPRoute:app/r2#main',
      'Gateway:infra/gw#http|HTTPRoute:app/r3#rule-1',
      'Gateway:infra/gw2#web|HTTPRoute:app/r2#main',
    ]);
  });

  it('prunes listeners whose hostname does not intersect: 60 listeners, one match', () => {
    const t = new Topology();
    const listeners = Array.from({ length: 60 }, (_, i) => ({
      name: `l${i}`,
      hostname: `h${i}.example.com`,
      protocol: 'HTTP',
    }));
    t.upsertGateway({ namespace: 'ns', name: 'big', gatewayClassName: 'gc', listeners });
    const d = t.upsertRoute({
      kind: 'HTTPRoute',
      namespace: 'ns',
      name: 'r',
      hostnames: ['h42.example.com'],
      parentRefs: [{ name: 'big' }],
      rules: [{}],
    });
    expect(d.added).toEqual(['Gateway:ns/big#l42|HTTPRoute:ns/r#rule-1']);
  });

  it('honours parentRef sectionName and port', () => {
    const t = standard();
    const r: RouteObject = {
      kind: 'HTTPRoute',
      namespace: 'app',
      name: 'x',
      parentRefs: [{ namespace: 'infra', name: 'gw', sectionName: 'admin' }],
      rules: [{}],
    };
    expect(t.upsertRoute(r).added).toEqual(['Gateway:infra/gw#admin|HTTPRoute:app/x#rule-1']);
    expect(t.upsertRoute({ ...r, parentRefs: [{ namespace: 'infra', name: 'gw', port: 80 }] }).added).toEqual(
      ['Gateway:infra/gw#http|HTTPRoute:app/x#rule-1'],
    );
  });

  it('honours allowedRoutes: Same by default, Selector by namespace labels, kinds and protocol', () => {
    const t = new Topology();
    const gw: GatewayObject = {
      namespace: 'infra',
      name: 'gw',
      gatewayClassName: 'gc',
      listeners: [
        { name: 'same', protocol: 'HTTP' },
        {
          name: 'sel',
          protocol: 'HTTP',
          allowedRoutes: { namespaces: { from: 'Selector', selector: { matchLabels: { team: 'a' } } } },
        },
        {
          name: 'grpc-only',
          protocol: 'HTTP',
          allowedRoutes: { namespaces: { from: 'All' }, kinds: [{ kind: 'GRPCRoute' }] },
        },
        { name: 'tcp', protocol: 'TCP', allowedRoutes: { namespaces: { from: 'All' } } },
      ],
    };
    t.upsertGateway(gw);
    const route: RouteObject = {
      kind: 'HTTPRoute',
      namespace: 'team-a',
      name: 'r',
      parentRefs: [{ namespace: 'infra', name: 'gw' }],
      rules: [{}],
    };
    expect(t.upsertRoute(route).added).toEqual([]);
    const d = t.upsertNamespace({ name: 'team-a', labels: { team: 'a' } });
    expect(d.added).toEqual(['Gateway:infra/gw#sel|HTTPRoute:team-a/r#rule-1']);
    expect(t.upsertNamespace({ name: 'team-a', labels: {} }).removed).toEqual([
      'Gateway:infra/gw#sel|HTTPRoute:team-a/r#rule-1',
    ]);
    const g = t.upsertRoute({ ...route, kind: 'GRPCRoute', name: 'g' });
    expect(g.added).toEqual(['Gateway:infra/gw#grpc-only|GRPCRoute:team-a/g#rule-1']);
  });

  it('creates paths when the gateway appears after the route, and removes them with it', () => {
    const t = new Topology();
    const s = standardTopology();
    t.upsertRoute(s.routes[0]!);
    expect(t.paths.size).toBe(0);
    const d = t.upsertGateway(s.gateways[0]!);
    expect(d.added.length).toBe(2);
    expect(d.objects).toContain('Gateway:infra/gw');
    expect(t.exists('Gateway:infra/gw#http')).toBe(true);
    expect(t.exists('HTTPRoute:app/r1#rule-2')).toBe(true);
    const rm = t.removeGateway('infra', 'gw');
    expect(rm.removed.length).toBe(2);
    expect(t.paths.size).toBe(0);
    expect(t.pathsThrough('HTTPRoute:app/r1').size).toBe(0);
  });

  it('reports renamed route rules as changed sections', () => {
    const t = standard();
    const r1 = standardTopology().routes[0]!;
    const d = t.upsertRoute({ ...r1, rules: [{ name: 'read' }, { name: 'write' }] });
    expect(d.objects.sort()).toEqual(['HTTPRoute:app/r1#rule-2', 'HTTPRoute:app/r1#write']);
    expect(d.removed).toEqual(['Gateway:infra/gw#http|HTTPRoute:app/r1#rule-2']);
  });
});
