// The one set-up of integration tests against a real kube-apiserver (tools/envtest): a KubeClient from
// the test server's kubeconfig, a policy controller with test settings (short lease, silent log), and
// the gateway fixtures (namespace, GatewayClass, Gateway, HTTPRoutes). Typed by shape, so core does not
// depend on tools/envtest (which does not depend on core either).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { type ControllerOptions, PolicyController } from '../controller/controller.ts';
import type { PolicyKind } from '../kind.ts';
import { KubeClient } from '../kube/client.ts';

/** What the fixtures need of an Envtest: its kubeconfig and a raw admin call. */
export interface TestApiServer {
  readonly kubeconfig: string;
  call(method: string, path: string, body?: unknown): Promise<{ status: number; body: unknown }>;
}

/** A KubeClient for the test server (or for another kubeconfig, e.g. a ServiceAccount's). */
export function clientOf(env: { readonly kubeconfig: string }, kubeconfig = env.kubeconfig): KubeClient {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  return new KubeClient(kc);
}

/** The name a kind's controller runs under: `limitpolicy-controller`, as the binaries. */
export const controllerName = (kind: PolicyKind) => `${kind.kind.toLowerCase()}-controller`;

/**
 * A policy controller for `kind` against the test server, not started: the binary's name, a 3 s lease
 * (failover tests stay short) and a silent log, each overridable.
 */
export function newController(
  env: { readonly kubeconfig: string },
  kind: PolicyKind,
  overrides: Partial<ControllerOptions> = {},
): PolicyController {
  return new PolicyController({
    client: clientOf(env),
    kind,
    name: controllerName(kind),
    leaseDurationSeconds: 3,
    log: () => {},
    ...overrides,
  });
}

/** newController, started (its caches synced). */
export async function startController(
  env: { readonly kubeconfig: string },
  kind: PolicyKind,
  overrides: Partial<ControllerOptions> = {},
): Promise<PolicyController> {
  const c = newController(env, kind, overrides);
  await c.start();
  return c;
}

const GW = '/apis/gateway.networking.k8s.io/v1';
const GW_VERSION = 'gateway.networking.k8s.io/v1';

/** POSTs `body` to `path`; anything but 201 (or 409 when `existing` is ok) throws with the answer. */
async function create(env: TestApiServer, path: string, body: unknown, existing = false): Promise<void> {
  const r = await env.call('POST', path, body);
  if (r.status === 201 || (existing && r.status === 409)) return;
  throw new Error(`POST ${path}: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
}

/** A namespace (already there is fine). */
export async function createNamespace(
  env: TestApiServer,
  name: string,
  labels: Record<string, string> = {},
): Promise<void> {
  await create(
    env,
    '/api/v1/namespaces',
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } },
    true,
  );
}

/** A GatewayClass (default `cascade`, controller `cascade.dev/gateway`; already there is fine). */
export async function createGatewayClass(
  env: TestApiServer,
  name = 'cascade',
  controllerName = 'cascade.dev/gateway',
): Promise<void> {
  await create(
    env,
    `${GW}/gatewayclasses`,
    { apiVersion: GW_VERSION, kind: 'GatewayClass', metadata: { name }, spec: { controllerName } },
    true,
  );
}

export interface GatewayFixture {
  namespace: string;
  /** Default `gw`. */
  name?: string;
  /** Default `cascade` (created when missing). */
  className?: string;
  /** Default one HTTP listener `http` on port 80. */
  listeners?: Record<string, unknown>[];
}

/** The Gateway's namespace, its class and the Gateway itself. */
export async function createGateway(env: TestApiServer, g: GatewayFixture): Promise<void> {
  const className = g.className ?? 'cascade';
  await createNamespace(env, g.namespace);
  await createGatewayClass(env, className);
  await create(env, `${GW}/namespaces/${g.namespace}/gateways`, {
    apiVersion: GW_VERSION,
    kind: 'Gateway',
    metadata: { name: g.name ?? 'gw', namespace: g.namespace },
    spec: {
      gatewayClassName: className,
      listeners: g.listeners ?? [{ name: 'http', port: 80, protocol: 'HTTP' }],
    },
  });
}

export interface RouteFixture {
  namespace: string;
  name: string;
  /** The parent Gateway's name (default `gw`) and namespace (default the route's). */
  gateway?: string;
  gatewayNamespace?: string;
  hostnames?: string[];
  /** Default one rule named `main` without backends. */
  rules?: Record<string, unknown>[];
}

/** An HTTPRoute attached to a Gateway. */
export async function createRoute(env: TestApiServer, r: RouteFixture): Promise<void> {
  const parent: Record<string, string> = { name: r.gateway ?? 'gw' };
  if (r.gatewayNamespace && r.gatewayNamespace !== r.namespace) parent.namespace = r.gatewayNamespace;
  await create(env, `${GW}/namespaces/${r.namespace}/httproutes`, {
    apiVersion: GW_VERSION,
    kind: 'HTTPRoute',
    metadata: { name: r.name, namespace: r.namespace },
    spec: {
      parentRefs: [parent],
      ...(r.hostnames ? { hostnames: r.hostnames } : {}),
      rules: r.rules ?? [{ name: 'main', backendRefs: [] }],
    },
  });
}

/** An object as a YAML file gives it. */
export interface TestObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; [k: string]: unknown };
  [k: string]: unknown;
}

const CLUSTER_SCOPED = new Set([
  'Namespace',
  'Node',
  'GatewayClass',
  'ClusterRole',
  'ClusterRoleBinding',
  'CustomResourceDefinition',
  'AdminNetworkPolicy',
  'BaselineAdminNetworkPolicy',
  'ClusterNetworkPolicy',
]);

/** The resource's plural as the API server names it (Gateway -> gateways, LimitPolicy -> limitpolicies). */
export function pluralOf(kind: string): string {
  const k = kind.toLowerCase();
  if (/[^aeiou]y$/.test(k)) return `${k.slice(0, -1)}ies`;
  if (k.endsWith('s')) return `${k}es`;
  return `${k}s`;
}

/** The API path of an object's collection, or of the object itself with `name`. */
export function apiPath(o: Pick<TestObject, 'apiVersion' | 'kind' | 'metadata'>, name?: string): string {
  const base = o.apiVersion.includes('/') ? `/apis/${o.apiVersion}` : `/api/${o.apiVersion}`;
  const ns = o.metadata.namespace && !CLUSTER_SCOPED.has(o.kind) ? `/namespaces/${o.metadata.namespace}` : '';
  return `${base}${ns}/${pluralOf(o.kind)}${name ? `/${name}` : ''}`;
}

/** Every object of every YAML file in `dir`, files in name order, documents in file order. */
export function readObjects(dir: string): TestObject[] {
  return readdirSync(dir)
    .filter((f) => /\.ya?ml$/.test(f))
    .sort()
    .flatMap((f) => parseAllDocuments(readFileSync(join(dir, f), 'utf8')).map((d) => d.toJS() as TestObject))
    .filter(Boolean);
}

/**
 * Creates objects as `kubectl create` would, in their order (so their creation order is the files'):
 * the namespaces they name first, then each object without its creationTimestamp. Throws naming the
 * object the API server refuses.
 */
export async function createObjects(env: TestApiServer, objects: readonly TestObject[]): Promise<void> {
  const namespaces = new Set(objects.map((o) => o.metadata.namespace).filter((n): n is string => Boolean(n)));
  for (const o of objects) if (o.kind === 'Namespace') namespaces.add(o.metadata.name);
  for (const ns of namespaces) await createNamespace(env, ns);
  for (const o of objects) {
    if (o.kind === 'Namespace') continue;
    const { creationTimestamp: _, ...metadata } = o.metadata;
    try {
      await create(env, apiPath(o), { ...o, metadata });
    } catch (e) {
      throw new Error(`${o.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}: ${(e as Error).message}`);
    }
  }
}
