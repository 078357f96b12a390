// The walls between packages (docs/architecture.md "Layout"), checked on every source file's package
// imports: core imports no other Cascade package and names no provider, enforcement component or
// gateway policy kind; wiring imports core only; the kinds import core and wiring; netpolicy's engine
// takes only bpf-datapath's layout (never its loader); cascadectl imports no test harness. Test files
// may import test fixtures; the walls on names hold for them too in core. netpolicy's own rooms are
// checked by packages/netpolicy/test/rooms.test.ts.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../../..');

/** What a package's source may import from other Cascade packages (its own always). */
interface Wall {
  /** Cascade package specifiers (exact, or a prefix ending in `/`) non-test files may import. */
  imports: readonly string[];
  /** What test files may import on top. */
  testImports?: readonly string[];
  /** Where the wall holds (a folder under the package, default src). */
  under?: string;
  /** Words no file may contain (case-insensitive), tests included. */
  names?: RegExp;
}

const TEST_FIXTURES = ['@cascade/envtest', '@cascade/core/testing', '@cascade/wiring/testing'];
/** Providers, enforcement components and the gateway policy kinds: what core must not know of. */
/** The data-plane providers: named only by packages/wiring (and the harness that runs them). */
const PROVIDER_NAMES = /istio|envoy/i;
const GATEWAY_NAMES =
  /istio|envoy|authorino|limitador|wasmplugin|\bAuthPolicy|\bRateLimitPolicy|TokenRateLimitPolicy|AuthConfig/i;

const WALLS: Record<string, Wall> = {
  'packages/core': { imports: [], testImports: ['@cascade/envtest'], names: GATEWAY_NAMES },
  'packages/wiring': { imports: ['@cascade/core', '@cascade/core/kube'], testImports: TEST_FIXTURES },
  'packages/authpolicy': {
    imports: ['@cascade/core', '@cascade/core/kube', '@cascade/wiring'],
    testImports: [...TEST_FIXTURES, '@cascade/ratelimitpolicy'],
  },
  'packages/ratelimitpolicy': {
    imports: ['@cascade/core', '@cascade/core/kube', '@cascade/wiring'],
    testImports: TEST_FIXTURES,
  },
  'packages/tokenratelimitpolicy': {
    imports: ['@cascade/core', '@cascade/core/kube', '@cascade/wiring', '@cascade/ratelimitpolicy'],
    testImports: TEST_FIXTURES,
  },
  'packages/netpolicy:engine': {
    under: 'src/engine',
    imports: ['@cascade/core', '@cascade/bpf-datapath/layout'],
    testImports: [...TEST_FIXTURES, '@cascade/bpf-datapath', '@cascade/bpf-datapath/testing'],
  },
  'packages/cascadectl': {
    imports: [
      '@cascade/core',
      '@cascade/core/kube',
      '@cascade/wiring',
      '@cascade/authpolicy',
      '@cascade/ratelimitpolicy',
      '@cascade/tokenratelimitpolicy',
      '@cascade/netpolicy',
      '@cascade/bpf-datapath',
      '@cascade/distribution',
    ],
    testImports: [...TEST_FIXTURES, '@cascade/netpolicy/testing'],
  },
};

const CASCADE_IMPORT = /(?:from|import)\s*\(?\s*'(@cascade\/[^']+)'/g;
const isTest = (f: string) => /\.test\.ts$/.test(f) || f.includes('/test/');

const files = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.name === 'node_modules'
      ? []
      : e.isDirectory()
        ? files(join(dir, e.name))
        : e.name.endsWith('.ts')
          ? [join(dir, e.name)]
          : [],
  );

const allowed = (spec: string, list: readonly string[]) =>
  list.some((a) => (a.endsWith('/') ? spec.startsWith(a) : spec === a));

/** The breaches in one file: "file -> specifier" for a forbidden import, "file names X" for a name. */
export function breaches(pkg: string, wall: Wall, file: string, text: string): string[] {
  const own = `@cascade/${pkg.split(':')[0]!.split('/')[1]}`;
  const out: string[] = [];
  const rel = relative(ROOT, file);
  for (const m of text.matchAll(CASCADE_IMPORT)) {
    const spec = m[1]!;
    if (spec === own || spec.startsWith(`${own}/`)) continue;
    const ok = allowed(spec, wall.imports) || (isTest(file) && allowed(spec, wall.testImports ?? []));
    if (!ok) out.push(`${rel} -> ${spec}`);
  }
  const named = wall.names && text.match(wall.names);
  if (named) out.push(`${rel} names ${named[0]}`);
  return out;
}

describe('walls between packages', () => {
  for (const [pkg, wall] of Object.entries(WALLS)) {
    it(`${pkg}: imports only what it may${wall.names ? ', names none of the gateway side' : ''}`, () => {
      const dir = join(ROOT, pkg.split(':')[0]!);
      const roots = wall.under ? [join(dir, wall.under)] : [join(dir, 'src'), join(dir, 'test')];
      const found = roots
        .filter((r) => {
          try {
            return readdirSync(r).length >= 0;
          } catch {
            return false;
          }
        })
        .flatMap(files)
        .flatMap((f) => breaches(pkg, wall, f, readFileSync(f, 'utf8')));
      expect(found).toEqual([]);
    });
  }

  it('no product source outside packages/wiring names a data-plane provider', () => {
    const named = readdirSync(join(ROOT, 'packages'))
      .filter((p) => p !== 'wiring')
      .flatMap((p) => {
        const src = join(ROOT, 'packages', p, 'src');
        try {
          return files(src);
        } catch {
          return [];
        }
      })
      .filter((f) => !isTest(f) && PROVIDER_NAMES.test(readFileSync(f, 'utf8')))
      .map((f) => relative(ROOT, f));
    expect(named).toEqual([]);
  });

  it('the check sees a breach', () => {
    const core = WALLS['packages/core']!;
    const f = join(ROOT, 'packages/core/src/x.ts');
    expect(breaches('packages/core', core, f, "import { W } from '@cascade/wiring';")).toEqual([
      'packages/core/src/x.ts -> @cascade/wiring',
    ]);
    expect(breaches('packages/core', core, f, '// as Istio does')).toEqual([
      'packages/core/src/x.ts names Istio',
    ]);
    expect(breaches('packages/core', core, f, "kind: 'RateLimitPolicy'")).toHaveLength(1);
    expect(breaches('packages/core', core, f, "const m = await import('@cascade/netpolicy');")).toHaveLength(
      1,
    );
    const engine = WALLS['packages/netpolicy:engine']!;
    const e = join(ROOT, 'packages/netpolicy/src/engine/x.ts');
    expect(
      breaches('packages/netpolicy:engine', engine, e, "import { load } from '@cascade/bpf-datapath';"),
    ).toEqual(['packages/netpolicy/src/engine/x.ts -> @cascade/bpf-datapath']);
    expect(
      breaches('packages/netpolicy:engine', engine, e, "import { S } from '@cascade/bpf-datapath/layout';"),
    ).toEqual([]);
    const cli = WALLS['packages/cascadectl']!;
    const c = join(ROOT, 'packages/cascadectl/src/x.ts');
    expect(
      breaches('packages/cascadectl', cli, c, "import { Envtest } from '@cascade/envtest';"),
    ).toHaveLength(1);
    expect(
      breaches('packages/cascadectl', cli, c, "import { startController } from '@cascade/core/testing';"),
    ).toHaveLength(1);
  });
});
