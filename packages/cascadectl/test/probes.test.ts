// netpol simulate --probes reads one-item-per-line lists without the YAML library when the values
// are plain: the result must be exactly what the YAML library reads, and a bad item is reported
// before anything is written.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { readProbes, resolveAddr as resolveAddrOf } from '../src/commands/netpol.ts';
import { run } from './run.ts';

const NP = resolve(import.meta.dirname, '../../../examples/netpol');
const tmp = mkdtempSync(join(tmpdir(), 'cascadectl-probes-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const LINES = [
  '- {from: shop/web, to: payments/ledger, protocol: TCP, port: 7443}',
  '- {from: shop/web, to: payments/ledger, port: grpc}',
  '- {from: shop/web, to: 10.96.0.50, protocol: UDP, port: 53}',
  '- {from: shop/web, to: "payments/ledger", protocol: TCP, port: "7443"}',
  "- {from: 'shop/web', to: payments/ledger, port: 0x50}",
  '- {from: shop/web, to: payments/ledger, protocol: tcp, port: 1e3}',
  '- {from: shop/web, to: fd00::10, port: 80}',
  '- {from: shop/web, to: svc:shop/web, port: http}',
  '- {from: shop/web, to: payments/ledger, port: 080}',
  '  # a comment',
  '',
  '- { from: shop/web , to: payments/ledger , port: 9090 }',
];

describe('probes files', () => {
  it('the fast path reads each line exactly as the YAML library does', () => {
    const f = join(tmp, 'mixed.yaml');
    writeFileSync(f, `${LINES.join('\n')}\n`);
    const yaml = (parse(LINES.join('\n')) as Record<string, unknown>[]).map((o) => ({
      from: o.from,
      to: o.to,
      port: o.port,
    }));
    const got = readProbes(f).map((p) => ({ from: p.from, to: p.to, port: p.port }));
    // readProbes turns "7443" into 7443 and keeps names: compare on what YAML gives, normalised so
    expect(got).toEqual(
      yaml.map((o) => ({
        ...o,
        port: typeof o.port === 'string' && /^\d+$/.test(o.port) ? Number(o.port) : o.port,
      })),
    );
  });

  it('a bad item is reported, naming it, before any result is written', async () => {
    const f = join(tmp, 'bad.yaml');
    writeFileSync(f, `${LINES[0]}\n${LINES[0]}\n- {from: shop/web, port: 80}\n`);
    const r = await run('netpol', 'simulate', NP, '--probes', f, '-o', 'json');
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/--probes item 3: from and to are required/);
    const y = join(tmp, 'broken.yaml');
    writeFileSync(y, `${LINES[0]}\n- {from: [shop/web, to: x}\n`);
    const b = await run('netpol', 'simulate', NP, '--probes', y, '-o', 'json');
    expect(b.code).toBe(2);
    expect(b.stdout).toBe('');
    expect(b.stderr).toMatch(/--probes .*broken\.yaml: /);
  });
});

describe('every probes-file form is read as a stream, to the same probes', () => {
  const probes = [
    { from: 'shop/web', to: 'payments/ledger', protocol: 'TCP', port: 7443 },
    { from: 'shop/web', to: 'payments/ledger', protocol: 'TCP', port: 'grpc' },
    { from: 'shop/cart', to: '10.96.0.50', protocol: 'UDP', port: 53 },
    { from: 'shop/web', to: 'svc:shop/web', protocol: 'TCP', port: 'http' },
  ];
  const want = probes.map((p) => ({ from: p.from, to: p.to, port: p.port }));
  const forms: Record<string, string> = {
    'yaml-lines': probes
      .map((p) => `- {from: ${p.from}, to: ${p.to}, protocol: ${p.protocol}, port: ${p.port}}`)
      .join('\n'),
    // block style, one item with a quoted value (the YAML library reads that one) and a comment
    'yaml-block': probes
      .map(
        (p, i) =>
          `- from: ${i === 1 ? `"${p.from}"` : p.from}\n  to: ${p.to}\n  # why\n  protocol: ${p.protocol}\n  port: ${p.port}`,
      )
      .join('\n'),
    'json-array': `[\n${probes.map((p) => JSON.stringify(p)).join(',\n')}\n]`,
    'json-array, one line, strings with brackets and commas': JSON.stringify(
      probes.map((p, i) => (i === 0 ? { ...p, note: 'a, b} [c' } : p)),
    ),
    'json-lines': probes.map((p) => JSON.stringify(p)).join('\n'),
  };
  it.each(Object.entries(forms))('%s', (name, text) => {
    const f = join(tmp, `${name.replace(/\W+/g, '-')}.probes`);
    writeFileSync(f, `${text}\n`);
    expect(readProbes(f).map((p) => ({ from: p.from, to: p.to, port: p.port }))).toEqual(want);
  });

  it('a JSON array with a bad element names it; text after the array is an error', () => {
    const f = join(tmp, 'bad.json');
    writeFileSync(f, '[{"from": "shop/web", "to": "shop/cart", "port": 80}, {"from": "shop/web"}]');
    expect(() => readProbes(f)).toThrow(/--probes item 2: from and to are required/);
    writeFileSync(f, '[{"from": "shop/web", "to": "shop/cart", "port": 80}] x');
    expect(() => readProbes(f)).toThrow(/text after the JSON array/);
    writeFileSync(f, '[{"from": "shop/web", "to": "shop/cart", "port": 80}, {"from": ');
    expect(() => readProbes(f)).toThrow(/--probes .*bad\.json: /);
  });

  it('other YAML is read whole only when small: a large one is refused, naming the forms that stream', () => {
    const f = join(tmp, 'whole.yaml');
    // a mapping with a list under it: not a form read as a stream
    const item = '  - {from: shop/web, to: shop/cart, port: 80}\n';
    writeFileSync(f, `probes:\n${item.repeat(4)}`);
    expect(() => readProbes(f)).toThrow(
      /must be a list of \{from, to, protocol, port\}: a YAML list one item per line/,
    );
    writeFileSync(f, `probes:\n${item.repeat(30_000)}`);
    expect(() => readProbes(f)).toThrow(/KiB in a form that is read whole; write it as a YAML list/);
  });

  it('-h says which forms stream', async () => {
    const r = await run('netpol', 'simulate', '-h');
    expect(r.stdout + r.stderr).toMatch(/read as a stream, item by item, when it is a YAML list/);
  });
});

describe('block style read without the YAML library', () => {
  it('reads every item exactly as the YAML library does (generated values and layouts)', async () => {
    const fc = (await import('fast-check')).default;
    const name = fc.constantFrom('shop/web', 'payments/ledger', '10.0.0.1', 'fd00::10', 'svc:shop/web');
    const odd = fc.constantFrom(
      'a:b',
      'a:',
      "'shop/web'",
      '"shop/cart"',
      'true',
      'no',
      '~',
      '1e3',
      '0x50',
      '080',
      '1.5',
      'x # note',
      '[a, b]',
      '{a: 1}',
      '',
    );
    const value = fc.oneof({ weight: 4, arbitrary: name }, odd);
    const pair = (k: string) => value.map((v) => `${k}: ${v}`);
    const extra = fc.oneof(
      pair('protocol'),
      fc.constantFrom(
        'protocol: TCP',
        'protocol: udp',
        'port: 8080',
        'port: http',
        'port: 080',
        'port: 70000',
      ),
      pair('note'),
      fc.constantFrom('# comment', '', '- nested', ' deeper: x', 'to: twice'),
    );
    const item = fc
      .tuple(pair('from'), pair('to'), fc.array(extra, { maxLength: 3 }))
      .chain(([f, t, rest]) => fc.shuffledSubarray([f, t, ...rest], { minLength: 2 + rest.length }))
      .map((lines) =>
        lines.map((l, i) => (i === 0 ? `- ${l}` : l && !l.startsWith(' ') ? `  ${l}` : l)).join('\n'),
      );
    const outcome = (f: string) => {
      try {
        return readProbes(f);
      } catch (e) {
        // a chunk is read apart from the rest: where an error is differs, what it is does not
        return (e as Error).message.replace(/--probes \S+: /, '').replace(/ at line \d+, column \d+/, '');
      }
    };
    const fast = join(tmp, 'block.yaml');
    // the same list after a document marker is not a form read as a stream: the YAML library reads it
    const whole = join(tmp, 'block-whole.yaml');
    let plain = 0;
    fc.assert(
      fc.property(fc.array(item, { minLength: 1, maxLength: 4 }), (items) => {
        const text = `${items.join('\n')}\n`;
        writeFileSync(fast, text);
        writeFileSync(whole, `---\n${text}`);
        const got = outcome(fast);
        const want = outcome(whole);
        // read to the end: the same probes; refused: both (which bad item is named first may differ,
        // the stream names the first item that fails, the whole read the first syntax error)
        if (Array.isArray(want) || Array.isArray(got)) expect(got).toEqual(want);
        if (Array.isArray(got)) plain++;
      }),
      { numRuns: 600 },
    );
    // the property met lists read to the end, not only refusals
    expect(plain).toBeGreaterThan(50);
  });
});

describe('the probe memo', () => {
  it("compares judgements with the lowered maps: all of a run's first ones, then one in 32", async () => {
    const { loadNetpol, ProbeMemo, simulateProbe, LOWERING_CHECK_ALL, LOWERING_CHECK_EVERY } = await import(
      '../src/commands/netpol.ts'
    );
    const { engine } = loadNetpol([NP]);
    // sandbox/toy -> shop/cart is denied at cart's ingress; lowered maps that lost their entries
    // (every lookup a miss: default allow) disagree with the policy
    const probe = ['sandbox/toy', 'shop/cart', 6, 9000] as const;
    expect(simulateProbe(engine, ...probe).verdict).toBe('deny');
    const cart = engine.podAt(resolveAddrOf(engine, 'shop/cart'))!;
    const layers = engine.tableOf(cart.namespace, cart.name, 'ingress')!;
    const states = [layers.admin.state, layers.lower.state];
    const lookups = states.map((t) => t.lookup);
    for (const t of states) t.lookup = () => undefined;
    try {
      expect(() => simulateProbe(engine, ...probe)).toThrow(/lowering disagrees/);
      const memo = new ProbeMemo();
      expect(() => simulateProbe(engine, ...probe, memo)).toThrow(/lowering disagrees/);
      // past the first judgements, only one in LOWERING_CHECK_EVERY is compared
      const late = new ProbeMemo();
      late.judged = LOWERING_CHECK_ALL + 1;
      expect(simulateProbe(engine, ...probe, late).verdict).toBe('deny');
      const sampled = new ProbeMemo();
      sampled.judged = LOWERING_CHECK_ALL * LOWERING_CHECK_EVERY;
      expect(() => simulateProbe(engine, ...probe, sampled)).toThrow(/lowering disagrees/);
    } finally {
      states.forEach((t, i) => {
        t.lookup = lookups[i]!;
      });
    }
  });

  it('answers every probe exactly as judging it afresh does (random clusters, capped identities too)', async () => {
    const fc = (await import('fast-check')).default;
    const { engineFor, probedClusterArb } = await import('@cascade/netpolicy/testing');
    const { ProbeMemo, simulateProbe } = await import('../src/commands/netpol.ts');
    let hits = 0;
    fc.assert(
      fc.property(probedClusterArb, (x) => {
        const e = engineFor(x);
        const { probes } = x;
        const memo = new ProbeMemo();
        // every probe twice: the second time from the memo
        for (const p of [...probes, ...probes]) {
          const r = simulateProbe(e, p.from, p.to, p.proto, p.port, memo);
          expect(r).toEqual(simulateProbe(e, p.from, p.to, p.proto, p.port));
          // the JSON written from the remembered text is the result's own
          expect(memo.json(r)).toBe(JSON.stringify(r));
        }
        hits += memo.hits;
      }),
      { numRuns: 400 },
    );
    expect(hits).toBeGreaterThan(0);
  });

  it('answers from a direction judged for another pair exactly as judging afresh (every pair, shuffled)', async () => {
    const fc = (await import('fast-check')).default;
    const { engineFor, clusterArb, PORTS, PROTOS } = await import('@cascade/netpolicy/testing');
    const { ProbeMemo, simulateProbe } = await import('../src/commands/netpol.ts');
    let judged = 0;
    let directions = 0;
    fc.assert(
      fc.property(clusterArb, fc.constantFrom(1, 2, undefined), fc.nat(), (cluster, cap, seed) => {
        const e = engineFor({ cluster, ...(cap ? { cap } : {}) });
        const ips = cluster.pods.flatMap((p) => p.ips);
        const probes = ips.flatMap((from) =>
          ips.flatMap((to) => PROTOS.flatMap((proto) => PORTS.map((port) => ({ from, to, proto, port })))),
        );
        // a shuffle, so that a direction is met first in any of its pairs
        let x = seed;
        for (let i = probes.length - 1; i > 0; i--) {
          x = (x * 1103515245 + 12345) % 2147483648;
          const j = x % (i + 1);
          [probes[i], probes[j]] = [probes[j]!, probes[i]!];
        }
        const memo = new ProbeMemo();
        for (const p of probes) {
          const r = simulateProbe(e, p.from, p.to, p.proto, p.port, memo);
          expect(r).toEqual(simulateProbe(e, p.from, p.to, p.proto, p.port));
          expect(memo.json(r)).toBe(JSON.stringify(r));
        }
        judged += memo.judged;
        directions += memo.directionsJudged;
      }),
      { numRuns: 80 },
    );
    // the direction memo answered: fewer directions judged than the two of each pair judged
    expect(directions).toBeLessThan(judged * 2);
  });

  it('past 65,536 distinct decisions a result text is its own, and still exact', async () => {
    const { loadNetpol, ProbeMemo, simulateProbe } = await import('../src/commands/netpol.ts');
    const { engine } = loadNetpol([NP]);
    const pods = [...engine.pods.keys()];
    for (const start of [0, 65_534, 200_000]) {
      const memo = new ProbeMemo();
      // decisions numbered from `start`: across the bound of the shared texts' key
      (memo as unknown as { nextJudged: number }).nextJudged = start;
      for (let round = 0; round < 2; round++)
        for (const from of pods)
          for (const to of pods)
            for (const port of [80, 81, 82, 7443, 9000]) {
              const r = simulateProbe(engine, from, to, 6, port, memo);
              expect(memo.json(r)).toBe(JSON.stringify(simulateProbe(engine, from, to, 6, port)));
            }
    }
  });

  it('writes as JSON exactly what serialising each result gives (pod names and addresses, twice)', async () => {
    const fc = (await import('fast-check')).default;
    const { engineFor, probedClusterArb } = await import('@cascade/netpolicy/testing');
    const { ServiceCatalog } = await import('@cascade/netpolicy');
    const { ProbeMemo, simulateProbes } = await import('../src/commands/netpol.ts');
    const { ProbeJson } = await import('../src/commands/probe-json.ts');
    const { ProbeColumns } = await import('../src/commands/probes-file.ts');
    let fast = 0;
    fc.assert(
      fc.property(probedClusterArb, fc.nat(), (x, seed) => {
        const e = engineFor(x);
        const services = new ServiceCatalog();
        const reported = { bridges: new Map(), tunnels: new Map() };
        // a pod's address as its name in about half the probes (the writer's own path)
        const named = (ip: string, k: number) => {
          const pod =
            (Math.imul(seed ^ k, 2654435761) >>> 16) & 1
              ? x.cluster.pods.find((p) => p.ips[0] === ip)
              : undefined;
          return pod ? `${pod.namespace}/${pod.name}` : ip;
        };
        const probes = [...x.probes, ...x.probes].map((p, i) => ({
          ...p,
          from: named(p.from, 2 * i),
          to: named(p.to, 2 * i + 1),
        }));
        const cols = new ProbeColumns();
        for (const p of probes) cols.push(p);
        const chunks: Buffer[] = [];
        const memo = new ProbeMemo();
        const json = new ProbeJson(e, services, reported, memo, cols, (b) => chunks.push(Buffer.from(b)));
        for (let i = 0; i < cols.length; i++) json.write(i);
        json.end();
        const want = probes.flatMap((p) =>
          simulateProbes(e, services, p.from, p.to, p.proto, p.port, undefined, reported).map((r) =>
            JSON.stringify(r),
          ),
        );
        expect(Buffer.concat(chunks).toString()).toBe(`[\n  ${want.join(',\n  ')}\n]\n`);
        fast += memo.hits;
      }),
      { numRuns: 300 },
    );
    expect(fast).toBeGreaterThan(0);
  });
});
