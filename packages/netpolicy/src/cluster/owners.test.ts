import { describe, expect, it } from 'vitest';
import { podFromObject } from '../engine/model.ts';
import { AddressOwners } from './owners.ts';

const pod = (name: string, ips: string[], created: string) => ({
  namespace: 'ns',
  name,
  labels: {},
  ips,
  ports: [],
  created,
});

describe('pod address ownership', () => {
  it('finished and hostNetwork pods own no pod address', () => {
    const base = { metadata: { name: 'p', namespace: 'ns' }, status: { podIP: '10.0.0.5' } };
    expect(podFromObject(base)).toMatchObject({ ips: ['10.0.0.5'] });
    for (const phase of ['Succeeded', 'Failed'])
      expect(podFromObject({ ...base, status: { ...base.status, phase } })).toMatchObject({ ips: [] });
    expect(podFromObject({ ...base, status: { ...base.status, phase: 'Running' } })).toMatchObject({
      ips: ['10.0.0.5'],
    });
    expect(podFromObject({ ...base, spec: { hostNetwork: true } })).toMatchObject({ ips: [] });
  });

  it('two live owners of one address: the newest wins, the conflict is reported, and it heals', () => {
    const o = new AddressOwners();
    o.claim('ns/old', pod('old', ['10.0.0.5', 'fd00::5'], '2026-01-01T00:00:00Z'));
    const r = o.claim('ns/new', pod('new', ['10.0.0.5'], '2026-02-01T00:00:00Z'));
    expect(r.get('ns/new')?.ips).toEqual(['10.0.0.5']);
    expect(r.get('ns/old')?.ips).toEqual(['fd00::5']);
    expect(o.conflicts()).toEqual([{ address: '10.0.0.5', owner: 'ns/new', losers: ['ns/old'] }]);
    // the new pod goes away: the old one gets its address back
    const back = o.claim('ns/new', undefined);
    expect(back.get('ns/old')?.ips).toEqual(['10.0.0.5', 'fd00::5']);
    expect(back.get('ns/new')).toBeUndefined();
    expect(o.conflicts()).toEqual([]);
  });

  it('a pod that loses its only address is removed', () => {
    const o = new AddressOwners();
    o.claim('ns/a', pod('a', ['10.0.0.6'], '2026-01-01T00:00:00Z'));
    const r = o.claim('ns/b', pod('b', ['10.0.0.6'], '2026-01-02T00:00:00Z'));
    expect(r.get('ns/a')).toBeUndefined();
    expect(r.has('ns/a')).toBe(true);
  });
});
