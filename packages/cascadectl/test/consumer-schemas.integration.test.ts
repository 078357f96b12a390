// What Cascade writes for other projects reads back unchanged from their schemas: every object
// rendered from every example and every input of ../shared/kuadrant-goldens (Authorino AuthConfigs,
// Limitador limits ConfigMaps and the same limits in limitador-operator's Limitador CR, Istio's
// WasmPlugin and EnvoyFilters, Envoy Gateway's EnvoyExtensionPolicy and EnvoyPatchPolicies; and a
// fixture with every form of Authorino's conditions: patternRef, all/any, predicates) is created
// on a real kube-apiserver that serves those projects' CRDs: Istio's and Envoy Gateway's own (from
// their modules), Authorino's and limitador-operator's as structural copies that prune what the real
// ones prune. A field the consumer does not have would be pruned, and the object would differ.
import { existsSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { authConfigCrd } from '@cascade/authpolicy';
import type { RenderedObject } from '@cascade/core';
import { apiPath, createNamespace } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, providerCrds } from '@cascade/envtest';
import { limitadorCrd } from '@cascade/ratelimitpolicy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { renderedObjects } from '../src/commands/render.ts';
import { gatewayWirings } from '../src/commands/wiring.ts';
import { loadManifests } from '../src/load.ts';
import { buildGatewayWorld } from '../src/world.ts';

const ROOT = resolve(import.meta.dirname, '../../..');
const GOLDENS = join(process.env.CASCADE_SHARED ?? join(ROOT, '..', 'shared'), 'kuadrant-goldens');

/** Every input: the gateway examples and each golden scenario's input. */
function inputs(): { name: string; dir: string }[] {
  const out = [
    { name: 'examples/gateway', dir: join(ROOT, 'examples/gateway') },
    { name: 'authorino-conditions', dir: join(import.meta.dirname, 'fixtures/authorino-conditions') },
  ];
  if (existsSync(GOLDENS))
    for (const d of readdirSync(GOLDENS).sort())
      if (existsSync(join(GOLDENS, d, 'input'))) out.push({ name: d, dir: join(GOLDENS, d, 'input') });
  return out;
}

/** Every object Cascade writes for another project from one input. */
function written(dir: string): RenderedObject[] {
  const world = buildGatewayWorld(loadManifests([dir]).manifests);
  const rendered = renderedObjects(world);
  const limits = rendered
    .filter((o) => o.kind === 'ConfigMap')
    .flatMap((o) => parseYaml((o.data as Record<string, string>)['limits.yaml'] ?? '[]') as unknown[]);
  const limitador: RenderedObject[] = limits.length
    ? [
        {
          apiVersion: 'limitador.kuadrant.io/v1alpha1',
          kind: 'Limitador',
          metadata: { name: 'limitador', namespace: 'kuadrant-system' },
          spec: { limits },
        } as RenderedObject,
      ]
    : [];
  return [...rendered, ...limitador, ...gatewayWirings(world).flatMap((w) => w.objects)];
}

/** What the object says (spec or data), without what the server owns. */
const content = (o: Record<string, unknown>) => ({ spec: o.spec, data: o.data });

describe.skipIf(!apiServerTestsEnabled())("the consumers' schemas keep every field Cascade writes", () => {
  let env: Envtest;
  beforeAll(async () => {
    env = await Envtest.start({ crdObjects: [authConfigCrd, limitadorCrd, ...providerCrds()] });
  }, 120_000);
  afterAll(async () => {
    await env?.stop();
  });

  it('finds the inputs', () => {
    expect(inputs().length, `examples and ${GOLDENS}`).toBeGreaterThanOrEqual(7);
  });

  it.each(inputs())(
    '$name: every object reads back unchanged',
    async ({ name, dir }) => {
      const objects = written(dir);
      expect(objects.some((o) => o.kind === 'AuthConfig') || name === '05-grpcroute').toBe(true);
      const kinds = new Set<string>();
      for (const [i, o] of objects.entries()) {
        // one namespace per input and object, so inputs and their object names never collide
        const namespace = `t-${name.replace(/[^a-z0-9]+/g, '-').slice(0, 40)}-${i}`;
        await createNamespace(env, namespace);
        const obj = { ...o, metadata: { ...o.metadata, namespace } } as RenderedObject;
        const created = await env.call('POST', apiPath(obj), obj);
        expect(
          created.status,
          `${o.kind} ${o.metadata.name}: ${JSON.stringify(created.body).slice(0, 300)}`,
        ).toBe(201);
        const back = await env.call('GET', apiPath(obj, o.metadata.name));
        expect(
          content(back.body as Record<string, unknown>),
          `${name}: ${o.kind} ${o.metadata.name}`,
        ).toEqual(content(o as unknown as Record<string, unknown>));
        kinds.add(o.kind);
      }
      if (name === 'authorino-conditions') {
        // the conditions arrive whole: the named patterns (the default's merged in) and the nested forms
        const spec = objects.find((o) => o.kind === 'AuthConfig')!.spec as Record<
          string,
          Record<string, unknown>
        >;
        expect(Object.keys(spec.patterns!).sort()).toEqual(['is-admin-path', 'is-read']);
        expect(JSON.stringify(spec.authorization)).toContain('"any":[{"patternRef":"is-read"}');
      }
      if (name === 'examples/gateway')
        expect([...kinds].sort()).toEqual(
          expect.arrayContaining(['AuthConfig', 'ConfigMap', 'EnvoyFilter', 'Limitador', 'WasmPlugin']),
        );
    },
    120_000,
  );
});
