import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ARTIFACTS } from './artifacts.ts';
import {
  addr16,
  CT_SET_BITS,
  decodeConfig,
  decodeCtKey,
  decodeCtValue,
  decodeEndpointValue,
  decodePolicyKey,
  decodePolicyValue,
  decodeVerdictKey,
  decodeVerdictValue,
  encodeConfig,
  encodeCtKey,
  encodeCtValue,
  encodeEndpointValue,
  encodePolicyKey,
  encodePolicyValue,
  encodeVerdictKey,
  encodeVerdictValue,
  formatAddr16,
  policyPrefixlen,
  SIZES,
} from './codecs.ts';
import { encodeTableEntry, policyRecords, type TableEntry, tableFingerprint } from './state.ts';

describe('codecs', () => {
  it('encode to the C layout sizes', () => {
    expect(encodePolicyKey({ table: 1, identity: 2, proto: 6, port: 80, plen: 16 })).toHaveLength(
      SIZES.policyKey,
    );
    expect(encodePolicyValue({ precedence: 1, verdict: 'deny', matchLen: 24, rule: 9 })).toHaveLength(
      SIZES.policyValue,
    );
    expect(
      encodeEndpointValue({
        flags: 3,
        tables: [
          [1, 2],
          [3, 4],
        ],
        revision: 5,
        identity: 6,
        ifindex: 7,
      }),
    ).toHaveLength(SIZES.endpointValue);
  });

  it('round-trip keys and values; the port is network order; any-protocol keys have prefixlen 64', () => {
    const k = { table: 7, identity: 0x01020304, proto: 17, port: 0x1234, plen: 12 };
    const b = encodePolicyKey(k);
    expect(b.readUInt32LE(0)).toBe(84);
    expect(b[13]).toBe(0x12);
    expect(decodePolicyKey(b)).toEqual(k);
    expect(policyPrefixlen({ proto: 0, plen: 16 })).toBe(64);
    const v = { precedence: 0xfffe0001, verdict: 'pass' as const, matchLen: 8, rule: 42 };
    expect(decodePolicyValue(encodePolicyValue(v))).toEqual(v);
    const ep = {
      flags: 5,
      tables: [
        [1, 2],
        [3, 4],
      ] as [[number, number], [number, number]],
      revision: 0xffffffff,
      identity: 300,
      ifindex: 0x7fffffff,
    };
    expect(decodeEndpointValue(encodeEndpointValue(ep))).toEqual(ep);
  });

  it('maps IPv4 into IPv6 and back', () => {
    expect(addr16('10.1.2.3').toString('hex')).toBe('00000000000000000000ffff0a010203');
    expect(formatAddr16(addr16('10.1.2.3'))).toBe('10.1.2.3');
    expect(addr16('fd00::1').toString('hex')).toBe('fd000000000000000000000000000001');
    expect(formatAddr16(addr16('fd00::1'))).toBe('fd00::1');
  });

  it('round-trip conntrack, verdict cache and config entries', () => {
    const ck = { local: '10.0.0.1', remote: 'fd00::2', lport: 41000, rport: 443, proto: 132 };
    expect(encodeCtKey(ck)).toHaveLength(SIZES.ctKey);
    expect(decodeCtKey(encodeCtKey(ck))).toEqual(ck);
    const cv = {
      revision: 0xfffffffe,
      generation: 3,
      direction: 'egress' as const,
      verdict: 'deny' as const,
      closing: true,
      nat: true,
      seen: 4_000_000,
      ifindex: 42,
      created: 123456789,
    };
    expect(encodeCtValue(cv)).toHaveLength(SIZES.ctValue);
    expect(decodeCtValue(encodeCtValue(cv))).toEqual(cv);
    const vk = { admin: 3, lower: 4, identity: 70000, proto: 6, port: 65535 };
    expect(encodeVerdictKey(vk)).toHaveLength(SIZES.verdictKey);
    expect(decodeVerdictKey(encodeVerdictKey(vk))).toEqual(vk);
    const vv = { epoch: 9, precedence: 0x7fff0001, rule: 77, verdict: 'deny' as const };
    expect(encodeVerdictValue(vv)).toHaveLength(SIZES.verdictValue);
    expect(decodeVerdictValue(encodeVerdictValue(vv))).toEqual(vv);
    const cfg = { epoch: 12, generation: 13, clock: 14, hostIdentity: 15 };
    expect(encodeConfig(cfg)).toHaveLength(SIZES.config);
    expect(decodeConfig(encodeConfig(cfg))).toEqual(cfg);
  });

  // The C structs as the compiler laid them out (BTF of the built object) have the codecs' sizes.
  it.skipIf(!existsSync(ARTIFACTS.object) && process.env.CI !== 'true')(
    'every map key and value has the size of its C struct (BTF of the built object)',
    () => {
      const btf = execFileSync('bpftool', ['btf', 'dump', 'file', ARTIFACTS.object], { encoding: 'utf8' });
      const size = (name: string) => Number(new RegExp(`STRUCT '${name}' size=(\\d+)`).exec(btf)?.[1]);
      expect({
        ipcacheKey: size('ipcache_key'),
        ipcacheValue: size('ipcache_value'),
        endpointKey: size('endpoint_key'),
        endpointValue: size('endpoint_value'),
        policyKey: size('policy_key'),
        policyValue: size('policy_value'),
        hostKey: size('endpoint_key'),
        ctKey: size('ct_key'),
        ctValue: size('ct_value'),
        verdictKey: size('verdict_key'),
        verdictValue: size('verdict_value'),
        config: size('config'),
        fragKey: size('frag_key'),
        fragValue: size('frag_value'),
        flowEvent: undefined,
        svcKey: size('svc_key'),
        svcValue: size('svc_value'),
        backendKey: size('backend_key'),
        natValue: size('nat_value'),
        stagedValue: size('staged_value'),
      }).toEqual({ ...SIZES, flowEvent: undefined });
      // (ring buffer records carry no BTF type: flow_event is checked by decoding real events)
      // the conntrack table: CT_SET_BITS sets of four 80-byte slots, as the codecs and tests assume
      expect(size('ct_set')).toBe(4 * 80);
      // the map's max_entries: VAR 'cascade_ct' -> its STRUCT -> 'max_entries' -> PTR -> ARRAY nr_elems
      const type = (id: string) => new RegExp(`^\\[${id}\\] (.*(?:\\n\\t.*)*)`, 'm').exec(btf)?.[1] ?? '';
      const def = type(/VAR 'cascade_ct' type_id=(\d+)/.exec(btf)![1]!);
      const ptr = type(/'max_entries' type_id=(\d+)/.exec(def)![1]!);
      expect(type(/type_id=(\d+)/.exec(ptr)![1]!)).toMatch(new RegExp(`nr_elems=${2 ** CT_SET_BITS}$`));
    },
  );
});

describe('rule-set records and fingerprints (loader)', () => {
  const r = (n: number) => Math.floor(Math.random() * n);
  const randomEntry = (): TableEntry => {
    const proto = [0, 6, 17, 132][r(4)]!;
    return {
      identity: r(2 ** 32),
      proto,
      port: proto === 0 ? 0 : r(65536),
      plen: proto === 0 ? 0 : r(17),
      precedence: r(2 ** 32),
      verdict: (['allow', 'deny', 'pass'] as const)[r(3)]!,
      rule: r(2 ** 32),
    };
  };

  it('the binary records bpfctl writes are the codecs’ bytes, back to back', () => {
    const entries = Array.from({ length: 500 }, randomEntry);
    const table = r(2 ** 32);
    const pairs = entries.map((e) => encodeTableEntry(table, e));
    expect(policyRecords(table, entries, true)).toEqual(Buffer.concat(pairs.flat()));
    expect(policyRecords(table, entries, false)).toEqual(Buffer.concat(pairs.map(([k]) => k)));
  });

  it('a table fingerprint ignores order and sees any change of content', () => {
    const entries = Array.from({ length: 200 }, randomEntry);
    const f = tableFingerprint(entries);
    expect(tableFingerprint([...entries].reverse())).toBe(f);
    for (const field of ['identity', 'port', 'precedence', 'rule'] as const) {
      const changed = entries.map((e, i) => (i === 7 ? { ...e, [field]: (e[field] + 1) >>> 0 } : e));
      if (field === 'port' && changed[7]!.proto === 0) continue;
      expect(tableFingerprint(changed)).not.toBe(f);
    }
    expect(tableFingerprint(entries.slice(1))).not.toBe(f);
    expect(tableFingerprint([...entries, entries[0]!])).not.toBe(f);
    // remembered per array, so the array and its entries are frozen: a change in place throws
    expect(() => entries.push(randomEntry())).toThrow(TypeError);
    expect(() => {
      (entries[0] as { verdict: string }).verdict = 'deny';
    }).toThrow(TypeError);
  });
});
