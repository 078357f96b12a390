// The gateway's data-plane wiring in the real cluster: the providers' real CRDs are installed after
// Cascade (the usual order; gateway.ts does it before applying the example), the wiring-controller
// writes examples/gateway's WasmPlugin (its class is Istio's) and the two EnvoyFilters with the
// configuration `cascadectl render --wasm-config` computes offline; a policy change rewrites the
// WasmPlugin exactly once and leaves the EnvoyFilters alone; deleting the gateway takes its objects
// with it.
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { providerCrds } from '@cascade/envtest';
import { expect } from 'vitest';
import { stringify } from 'yaml';
import { canon, cascadectl, env, kubectl, kubectlJson, ROOT, sh, until } from '../harness.ts';
import { figures } from './shared.ts';

type Wasm = { metadata: { resourceVersion: string }; spec: { pluginConfig: unknown } };

/** Istio's and Envoy Gateway's CRDs of the four kinds, applied to the cluster. */
export function installProviderCrds(): void {
  sh('kubectl', ['apply', '--server-side', '-f', '-'], {
    input: providerCrds()
      .map((c) => stringify(c))
      .join('---\n'),
  });
}

/** The WasmPlugin of infra/main, once the wiring-controller has written it. */
export const mainWasmPlugin = () =>
  until(
    'the WasmPlugin of infra/main',
    90,
    () => kubectlJson<{ items: Wasm[] }>('get', 'wasmplugins', '-n', 'infra').items[0],
  );

export async function gatewayWiring(): Promise<void> {
  const plugin = await mainWasmPlugin();
  const offline = JSON.parse(
    cascadectl('render', '-f', join(ROOT, 'examples/gateway'), '--wasm-config', '-o', 'json'),
  ) as Record<string, unknown>;
  expect(canon(plugin.spec.pluginConfig)).toBe(canon(offline['infra/main']));
  const filters = () =>
    kubectlJson<{ items: { metadata: { name: string; resourceVersion: string } }[] }>(
      'get',
      'envoyfilters',
      '-n',
      'infra',
    ).items;
  expect(
    filters()
      .map((f) => f.metadata.name)
      .sort(),
  ).toEqual(['cascade-main-auth', 'cascade-main-ratelimit']);
  const filterVersions = filters().map((f) => f.metadata.resourceVersion);

  // a policy change: the WasmPlugin is rewritten exactly once, the EnvoyFilters not at all
  const watcher: ChildProcess = spawn(
    'kubectl',
    ['get', 'wasmplugin', '-n', 'infra', 'cascade-main', '--watch', '--output-watch-events', '-o', 'json'],
    { env: env() },
  );
  let events = '';
  watcher.stdout?.on('data', (d) => {
    events += d.toString();
  });
  try {
    await new Promise((r) => setTimeout(r, 1500)); // the watch's initial ADDED
    const t1 = Date.now();
    kubectl(
      'patch',
      'ratelimitpolicy',
      '-n',
      'infra',
      'platform-limits',
      '--type=merge',
      '-p',
      JSON.stringify({
        spec: { defaults: { limits: { global: { rates: [{ limit: 120, window: '1m' }] } } } },
      }),
    );
    await until('the WasmPlugin rewritten', 60, () =>
      kubectlJson<Wasm>('get', 'wasmplugin', '-n', 'infra', 'cascade-main').metadata.resourceVersion !==
      plugin.metadata.resourceVersion
        ? true
        : undefined,
    );
    figures.wiringPolicyChangeSeconds = (Date.now() - t1) / 1000;
    await new Promise((r) => setTimeout(r, 5000)); // a second write would show by now
    const modified = events.split(/\n(?=\{)/).filter((e) => /"type":\s*"MODIFIED"/.test(e));
    expect(modified.length).toBe(1);
    expect(filters().map((f) => f.metadata.resourceVersion)).toEqual(filterVersions);
  } finally {
    watcher.kill();
  }

  // the gateway deleted: its objects go (owned by it; the controller deletes them too)
  kubectl('delete', 'gateway', '-n', 'infra', 'main', '--wait=false');
  await until('the wiring objects deleted', 60, () =>
    kubectlJson('get', 'wasmplugins', '-n', 'infra').items.length + filters().length === 0 ? true : undefined,
  );
}
