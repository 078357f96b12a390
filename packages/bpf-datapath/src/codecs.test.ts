import { describe, expect, it } from 'vitest';
import {
  addr16,
  decodeEndpointValue,
  decodePolicyKey,
  decodePolicyValue,
  encodeEndpointValue,
  encodePolicyKey,
  encodePolicyValue,
  formatAddr16,
  policyPrefixlen,
  SIZES,
} from './codecs.ts';

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
    };
    expect(decodeEndpointValue(encodeEndpointValue(ep))).toEqual(ep);
  });

  it('maps IPv4 into IPv6 and back', () => {
    expect(addr16('10.1.2.3').toString('hex')).toBe('00000000000000000000ffff0a010203');
    expect(formatAddr16(addr16('10.1.2.3'))).toBe('10.1.2.3');
    expect(addr16('fd00::1').toString('hex')).toBe('fd000000000000000000000000000001');
    expect(formatAddr16(addr16('fd00::1'))).toBe('fd00::1');
  });
});
