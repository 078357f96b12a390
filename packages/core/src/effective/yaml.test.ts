import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { toYaml } from './yaml.ts';

const key = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.constantFrom('true', 'null', '1', 'a: b', '- x', '#c', 'descriptors[0]["k"]'),
);
const leaf = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.constantFrom(
    'yes',
    'No',
    '~',
    '012',
    '1e3',
    ' lead',
    'trail ',
    'a: b',
    '- a',
    '"q"',
    "it's",
    '@x',
    '*a',
    '&b',
    '!t',
    '%p',
    '|',
    '>',
    '{}',
    '[]',
    'x # y',
    'descriptors[0]["auth.identity.userid"] == "1"',
  ),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
  fc.constant(null),
);
const value = fc.letrec((tie) => ({
  v: fc.oneof(
    { depthSize: 'small' },
    leaf,
    fc.array(tie('v'), { maxLength: 4 }),
    fc.dictionary(key, tie('v'), { maxKeys: 4 }),
  ),
})).v;

describe('toYaml', () => {
  it('round-trips plain data through a real YAML parser', () => {
    fc.assert(
      fc.property(value, (v) => {
        expect(parse(toYaml(v))).toEqual(JSON.parse(JSON.stringify(v)));
      }),
      { numRuns: 2000 },
    );
  });

  it('reads like hand-written YAML for limits', () => {
    expect(
      toYaml([
        {
          namespace: 'infra/main',
          max_value: 100,
          conditions: ['descriptors[0]["k"] == "1"'],
          variables: [],
        },
      ]),
    ).toBe(
      [
        '- namespace: infra/main',
        '  max_value: 100',
        '  conditions:',
        `    - 'descriptors[0]["k"] == "1"'`,
        '  variables: []',
        '',
      ].join('\n'),
    );
  });
});
