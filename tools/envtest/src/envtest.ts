// A real kube-apiserver and etcd on loopback for integration tests, the way controller-runtime's
// envtest does it: binaries built by the set-up step (scripts/setup.d/20-envtest.sh), a static token
// identity in system:masters, a kubeconfig, and the CRDs installed and established.
import { type ChildProcess, spawn } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';

const here = dirname(fileURLToPath(import.meta.url));

export interface EnvtestPaths {
  bin: string;
  crds: string;
  /** Older bundles of upstream CRDs, one directory per version (network-policy-api v0.2.0's). */
  olderCrds?: string;
  /** The data-plane providers' CRDs (Istio, Envoy Gateway), installed only where a test asks. */
  providerCrds?: string;
}

/** The CRDs of these provider kinds (WasmPlugin, EnvoyFilter, EnvoyExtensionPolicy, EnvoyPatchPolicy) from the providers' modules. */
export function providerCrds(
  kinds: readonly string[] = ['WasmPlugin', 'EnvoyFilter', 'EnvoyExtensionPolicy', 'EnvoyPatchPolicy'],
): Record<string, unknown>[] {
  const dir = providerCrdDir();
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .flatMap((f) => parseAllDocuments(readFileSync(join(dir, f), 'utf8')).map((d) => d.toJS()))
    .filter((o) => o?.kind === 'CustomResourceDefinition' && kinds.includes(o.spec?.names?.kind));
}

/** The directory of an older upstream bundle's CRDs (`v0.2.0`: network-policy-api's ClusterNetworkPolicy v1alpha2 only). */
export function olderCrdDir(version: string): string {
  const d = envtestPaths()?.olderCrds;
  if (!d || !existsSync(join(d, version)))
    throw new Error(
      `older CRDs ${version} missing: run scripts/setup.sh (it fetches them from their Go modules)`,
    );
  return join(d, version);
}

/** The providers' CRD directory (Istio's WasmPlugin/EnvoyFilter, Envoy Gateway's policies); throws when the set-up did not fetch them. */
export function providerCrdDir(): string {
  const d = envtestPaths()?.providerCrds;
  if (!d || !existsSync(d))
    throw new Error(
      'provider CRDs missing: run scripts/setup.sh (it fetches them from istio.io/api and envoyproxy/gateway)',
    );
  return d;
}

export function envtestPaths(): EnvtestPaths | undefined {
  const f = join(here, '..', '.local', 'paths.json');
  if (!existsSync(f)) return undefined;
  const p = JSON.parse(readFileSync(f, 'utf8')) as EnvtestPaths;
  return existsSync(join(p.bin, 'kube-apiserver')) && existsSync(join(p.bin, 'etcd')) ? p : undefined;
}

/** true: run the integration tests; false: skip (only outside CI). Throws in CI without an API server. */
export function apiServerTestsEnabled(): boolean {
  if (envtestPaths()) return true;
  if (process.env.CI === 'true')
    throw new Error(
      'integration tests need the envtest API server in CI: run scripts/setup.sh (it builds kube-apiserver and etcd)',
    );
  return false;
}

/**
 * The environment of envtest's etcd and kube-apiserver: a test server's heap is small and short-lived,
 * so it collects garbage when the heap has grown tenfold (GOGC=1000) or reaches 2 GiB (GOMEMLIMIT),
 * not at every doubling. A third of a start's CPU was the collector's: measured 2.9 s of API server
 * CPU for a start with the set-up's CRDs at Go's default, 2.1 s with this. The limit leaves room for
 * `npm run bench`'s controller suite (5,025 EffectivePolicies): at 1 GiB its API server sat at the
 * limit and collected without pause (86 s of CPU), at 2 GiB it used 65 s.
 */
const goEnv = (): NodeJS.ProcessEnv => ({ ...process.env, GOGC: '1000', GOMEMLIMIT: '2GiB' });

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

export interface ApiCall {
  status: number;
  body: unknown;
}

export class Envtest {
  readonly dir: string;
  readonly token = randomBytes(16).toString('hex');
  readonly kubeconfig: string;
  apiPort = 0;
  private etcdPort = 0;
  private etcd?: ChildProcess;
  private api?: ChildProcess;
  /** Set while stop()/stopApiServer() take things down on purpose. */
  private stopping = false;
  private readonly paths: EnvtestPaths;
  private logs = '';

  private constructor(paths: EnvtestPaths) {
    this.paths = paths;
    this.dir = mkdtempSync(join(tmpdir(), 'cascade-envtest-'));
    this.kubeconfig = join(this.dir, 'kubeconfig');
  }

  get server(): string {
    return `https://127.0.0.1:${this.apiPort}`;
  }

  /**
   * `crdDirs`: more CRD directories; `crdObjects`: more CRDs; `skipCrds`: names of the set-up's CRDs
   * not to install (a test that installs an older version of one: `olderCrdDir`).
   */
  static async start(
    opts: { crdDirs?: string[]; crdObjects?: unknown[]; skipCrds?: readonly string[] } = {},
  ): Promise<Envtest> {
    const paths = envtestPaths();
    if (!paths) throw new Error('envtest binaries missing: run scripts/setup.sh');
    const e = new Envtest(paths);
    // Never leave etcd or kube-apiserver behind, even when a test run is killed.
    process.once('exit', () => {
      e.api?.kill('SIGKILL');
      e.etcd?.kill('SIGKILL');
    });
    await e.startEtcd();
    await e.startApiServer();
    writeFileSync(
      e.kubeconfig,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'envtest', cluster: { server: e.server, 'insecure-skip-tls-verify': true } }],
        users: [{ name: 'admin', user: { token: e.token } }],
        contexts: [{ name: 'envtest', context: { cluster: 'envtest', user: 'admin' } }],
        'current-context': 'envtest',
      }),
    );
    const crds = [...(opts.crdObjects ?? [])];
    for (const d of [paths.crds, ...(opts.crdDirs ?? [])]) {
      for (const f of readdirSync(d)
        .filter((x) => x.endsWith('.yaml'))
        .sort()) {
        for (const doc of parseAllDocuments(readFileSync(join(d, f), 'utf8'))) {
          const o = doc.toJS() as { kind?: string; metadata?: { name?: string } } | null;
          if (o?.kind !== 'CustomResourceDefinition') continue;
          if (d === paths.crds && opts.skipCrds?.includes(o.metadata?.name ?? '')) continue;
          crds.push(o);
        }
      }
    }
    await e.installCrds(crds);
    return e;
  }

  private async startEtcd(): Promise<void> {
    this.etcdPort = await freePort();
    const peer = await freePort();
    this.etcd = spawn(
      join(this.paths.bin, 'etcd'),
      [
        `--data-dir=${join(this.dir, 'etcd')}`,
        `--listen-client-urls=http://127.0.0.1:${this.etcdPort}`,
        `--advertise-client-urls=http://127.0.0.1:${this.etcdPort}`,
        `--listen-peer-urls=http://127.0.0.1:${peer}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${peer}`,
        `--initial-cluster=default=http://127.0.0.1:${peer}`,
        '--unsafe-no-fsync=true',
        '--log-level=error',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'], env: goEnv() },
    );
    this.etcd.stderr?.on('data', (d) => {
      this.logs = (this.logs + String(d)).slice(-20000);
    });
    this.etcd.once('exit', (code, signal) => {
      if (!this.stopping)
        process.stderr.write(
          `[envtest] etcd exited (code ${code}, signal ${signal}): ${this.logs.slice(-1500)}\n`,
        );
    });
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      try {
        const r = await fetch(`http://127.0.0.1:${this.etcdPort}/health`);
        if (r.ok) return;
      } catch {}
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`etcd did not start: ${this.logs.slice(-2000)}`);
  }

  async startApiServer(): Promise<void> {
    this.stopping = false;
    if (!this.apiPort) this.apiPort = await freePort();
    const key = join(this.dir, 'sa.key');
    const pub = join(this.dir, 'sa.pub');
    if (!existsSync(key)) {
      const kp = generateKeyPairSync('rsa', { modulusLength: 2048 });
      writeFileSync(key, kp.privateKey.export({ type: 'pkcs1', format: 'pem' }));
      writeFileSync(pub, kp.publicKey.export({ type: 'spki', format: 'pem' }));
      writeFileSync(join(this.dir, 'tokens.csv'), `${this.token},admin,admin,"system:masters"\n`);
    }
    this.api = spawn(
      join(this.paths.bin, 'kube-apiserver'),
      [
        `--etcd-servers=http://127.0.0.1:${this.etcdPort}`,
        `--cert-dir=${join(this.dir, 'certs')}`,
        `--secure-port=${this.apiPort}`,
        '--bind-address=127.0.0.1',
        '--advertise-address=127.0.0.1',
        `--service-account-key-file=${pub}`,
        `--service-account-signing-key-file=${key}`,
        '--service-account-issuer=https://cascade.envtest',
        `--token-auth-file=${join(this.dir, 'tokens.csv')}`,
        '--authorization-mode=RBAC',
        '--service-cluster-ip-range=10.96.0.0/24',
        '--disable-admission-plugins=ServiceAccount',
        '--enable-priority-and-fairness=false',
        '--v=0',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'], env: goEnv() },
    );
    this.api.stderr?.on('data', (d) => {
      this.logs = (this.logs + String(d)).slice(-20000);
    });
    const api = this.api;
    api.once('exit', (code, signal) => {
      // An API server that dies under a test is worth a line with its last words.
      if (this.api === api && !this.stopping)
        process.stderr.write(
          `[envtest] kube-apiserver exited (code ${code}, signal ${signal}): ${this.logs.slice(-1500)}\n`,
        );
    });
    const deadline = Date.now() + 90_000;
    while (Date.now() < deadline) {
      const r = await this.call('GET', '/readyz').catch(() => undefined);
      if (r?.status === 200) return;
      if (this.api.exitCode !== null) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    throw new Error(`kube-apiserver did not become ready: ${this.logs.slice(-3000)}`);
  }

  /** Stops kube-apiserver (etcd keeps the data); startApiServer() brings it back on the same port. */
  async stopApiServer(): Promise<void> {
    const p = this.api;
    if (!p || p.exitCode !== null) return;
    this.stopping = true;
    // kube-apiserver drains open watches on SIGTERM for up to a minute: kill it after 3 s.
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGTERM');
    const timer = setTimeout(() => p.kill('SIGKILL'), 3000);
    await exited;
    clearTimeout(timer);
  }

  /** A raw API call with the admin token (for tests and set-up; controllers use client-node). */
  call(
    method: string,
    path: string,
    body?: unknown,
    contentType = 'application/json',
    headers: Record<string, string> = {},
  ): Promise<ApiCall> {
    return new Promise((resolve, reject) => {
      const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
      const req = request(
        {
          host: '127.0.0.1',
          port: this.apiPort,
          path,
          method,
          rejectUnauthorized: false,
          headers: {
            ...headers,
            authorization: `Bearer ${this.token}`,
            ...(data ? { 'content-type': contentType, 'content-length': data.length } : {}),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('error', reject);
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: unknown = text;
            try {
              parsed = JSON.parse(text);
            } catch {}
            resolve({ status: res.statusCode ?? 0, body: parsed });
          });
        },
      );
      req.on('error', reject);
      if (data) req.write(data);
      req.end();
    });
  }

  async installCrds(crds: unknown[]): Promise<void> {
    for (const crd of crds) {
      const r = await this.call('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd);
      if (r.status !== 201 && r.status !== 409)
        throw new Error(
          `installing CRD ${(crd as { metadata: { name: string } }).metadata.name}: ${r.status} ${JSON.stringify(r.body).slice(0, 500)}`,
        );
    }
    for (const crd of crds) {
      const name = (crd as { metadata: { name: string } }).metadata.name;
      const deadline = Date.now() + 30_000;
      for (;;) {
        const r = await this.call('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`);
        const conds =
          (r.body as { status?: { conditions?: { type: string; status: string }[] } }).status?.conditions ??
          [];
        if (conds.some((c) => c.type === 'Established' && c.status === 'True')) {
          // Established is not yet served: wait until a list answers 200 (not 404/429 while initialising).
          const spec = (
            crd as {
              spec: {
                group: string;
                names: { plural: string };
                versions: { name: string; served: boolean }[];
              };
            }
          ).spec;
          const v = spec.versions.find((x) => x.served)!.name;
          const list = await this.call('GET', `/apis/${spec.group}/${v}/${spec.names.plural}?limit=1`);
          if (list.status === 200) break;
        }
        if (Date.now() > deadline) throw new Error(`CRD ${name} not established`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  /**
   * A Pod as a kubelet would leave it running (envtest has no kubelet): created on `node`, then its
   * status set to Running with `ip`. Fails the caller on any refusal.
   */
  async runningPod(
    namespace: string,
    name: string,
    o: { node: string; ip: string; labels?: Record<string, string>; ports?: unknown[] },
  ): Promise<void> {
    const r = await this.call('POST', `/api/v1/namespaces/${namespace}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace, labels: o.labels ?? { app: name } },
      spec: { nodeName: o.node, containers: [{ name: 'c', image: 'example/c', ports: o.ports ?? [] }] },
    });
    if (r.status !== 201)
      throw new Error(`pod ${namespace}/${name}: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
    const s = await this.call('PUT', `/api/v1/namespaces/${namespace}/pods/${name}/status`, {
      ...(r.body as object),
      status: { phase: 'Running', podIP: o.ip, podIPs: [{ ip: o.ip }] },
    });
    if (s.status !== 200) throw new Error(`pod ${namespace}/${name} status: ${s.status}`);
  }

  /**
   * A ServiceAccount with exactly these RBAC objects (ClusterRoles, ClusterRoleBindings, Roles,
   * RoleBindings; its namespace is created when missing), and the path of a kubeconfig that acts as
   * it, once the authorizer has the bindings (checked with `probe`, a path the account may GET). A
   * component run with it proves its RBAC: a missing grant fails the test. `boundToPod`: the token is
   * bound to that pod of `namespace` (which must exist), so it carries the pod's node as a DaemonSet
   * pod's token does (`authentication.kubernetes.io/node-name` in the user's extra).
   */
  async serviceAccount(
    namespace: string,
    name: string,
    rbac: unknown[],
    probe: string,
    boundToPod?: string,
  ): Promise<string> {
    await this.call('POST', '/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: namespace },
    });
    const sa = await this.call('POST', `/api/v1/namespaces/${namespace}/serviceaccounts`, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name, namespace },
    });
    if (sa.status !== 201 && sa.status !== 409)
      throw new Error(`ServiceAccount ${namespace}/${name}: ${sa.status}`);
    const rbacApi = '/apis/rbac.authorization.k8s.io/v1';
    for (const o of rbac as { kind: string; metadata: { name: string; namespace?: string } }[]) {
      const plural = {
        ClusterRole: 'clusterroles',
        ClusterRoleBinding: 'clusterrolebindings',
        Role: 'roles',
        RoleBinding: 'rolebindings',
      }[o.kind];
      if (!plural) throw new Error(`serviceAccount: ${o.kind} ${o.metadata.name} is not an RBAC object`);
      const path = o.metadata.namespace
        ? `${rbacApi}/namespaces/${o.metadata.namespace}/${plural}`
        : `${rbacApi}/${plural}`;
      const r = await this.call('POST', path, o);
      if (r.status !== 201 && r.status !== 409)
        throw new Error(`${o.kind} ${o.metadata.name}: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
    }
    const tr = await this.call('POST', `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`, {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { expirationSeconds: 3600, ...(await this.boundRef(namespace, boundToPod)) },
    });
    if (tr.status !== 201)
      throw new Error(`token of ${namespace}/${name}: ${tr.status} ${JSON.stringify(tr.body).slice(0, 300)}`);
    const token = (tr.body as { status: { token: string } }).status.token;
    const path = join(this.dir, `kubeconfig-${namespace}-${name}${boundToPod ? `-${boundToPod}` : ''}`);
    writeFileSync(
      path,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'envtest', cluster: { server: this.server, 'insecure-skip-tls-verify': true } }],
        users: [{ name, user: { token } }],
        contexts: [{ name, context: { cluster: 'envtest', user: name } }],
        'current-context': name,
      }),
    );
    // the authorizer sees new bindings a moment after the POSTs returned
    await waitFor(`the RBAC of ${namespace}/${name} reaches the authorizer`, async () => {
      const r = await this.call('GET', probe, undefined, 'application/json', {
        'Impersonate-User': `system:serviceaccount:${namespace}:${name}`,
      });
      return r.status === 200 ? true : undefined;
    });
    return path;
  }

  private async boundRef(namespace: string, pod?: string): Promise<object> {
    if (!pod) return {};
    const r = await this.call('GET', `/api/v1/namespaces/${namespace}/pods/${pod}`);
    if (r.status !== 200) throw new Error(`pod ${namespace}/${pod} to bind a token to: ${r.status}`);
    const uid = (r.body as { metadata: { uid: string } }).metadata.uid;
    return { boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: pod, uid } };
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.stopApiServer();
    const e = this.etcd;
    if (e && e.exitCode === null) {
      e.kill('SIGTERM');
      await new Promise((r) => e.once('exit', r));
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Polls `f` until it returns something other than undefined (errors count as not yet), or times out. */
export async function waitFor<T>(what: string, f: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await f();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}
