// --audit-namespaces on the real program: pods of an audited namespace have their allowed first
// packets reported too (the flows show allowed flows beside denied ones); other pods' are not.
import { buildPacket, EP_FLAGS, TCP_FLAGS } from '@cascade/bpf-datapath';
import { freshDatapath, kernelTestsEnabled } from '@cascade/bpf-datapath/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NetpolEngine } from '../engine/engine.ts';
import { datapathState } from './datapath.ts';

describe.skipIf(!kernelTestsEnabled())('audit mode: allowed flows reported for audited namespaces', () => {
  let fresh: Awaited<ReturnType<typeof freshDatapath>>;
  beforeAll(async () => {
    fresh = await freshDatapath();
  });
  afterAll(async () => fresh?.cleanup());

  it('marks the audited pods, and the kernel reports their allowed flows only', async () => {
    const engine = NetpolEngine.fromCluster({
      namespaces: [
        { name: 'audited', labels: {} },
        { name: 'quiet', labels: {} },
      ],
      nodes: [],
      pods: [
        { namespace: 'audited', name: 'a', labels: {}, ips: ['10.0.0.1'], ports: [] },
        { namespace: 'quiet', name: 'b', labels: {}, ips: ['10.0.0.2'], ports: [] },
      ],
      policies: [],
    });
    const state = datapathState(engine, undefined, { auditNamespaces: new Set(['audited']) });
    const flags = new Map(state.endpoints.map((e) => [e.ip, e.flags]));
    expect(flags.get('10.0.0.1')! & EP_FLAGS.AUDIT_ALLOW).toBe(EP_FLAGS.AUDIT_ALLOW);
    expect(flags.get('10.0.0.2')! & EP_FLAGS.AUDIT_ALLOW).toBe(0);
    const { dp } = fresh;
    await dp.sync(state);
    await dp.events();
    const syn = (src: string, dst: string) =>
      buildPacket({ src, dst, proto: 6, sport: 41000, dport: 80, tcpFlags: TCP_FLAGS.SYN });
    expect((await dp.run('from_endpoint', syn('10.0.0.1', '10.0.0.2'))).retval).toBe(0);
    expect((await dp.run('from_endpoint', syn('10.0.0.2', '10.0.0.1'))).retval).toBe(0);
    const events = await dp.events();
    expect(events.filter((e) => e.verdict === 'allow').map((e) => [e.src, e.direction])).toEqual([
      ['10.0.0.1', 'egress'],
    ]);
  });
});
