// A thin REST client: configuration and authentication come from @kubernetes/client-node's KubeConfig
// (kubeconfig, in-cluster service account, tokens, client certificates); requests, watches and
// server-side apply are plain HTTPS here so that the runtime controls retries and streaming.
import { createInterface } from 'node:readline';
import type { KubeConfig } from '@kubernetes/client-node';

/** How long a watch may carry nothing, not even a bookmark, before it is resumed. */
export const WATCH_IDLE_MS = 90_000;

/** A watch the server answered and then left silent for WATCH_IDLE_MS: resume it, nothing failed. */
export class WatchIdle extends Error {}

export class ApiError extends Error {
  readonly status: number;
  readonly body: unknown;
  constructor(status: number, body: unknown, what: string) {
    super(
      `${what}: ${status} ${typeof body === 'object' && body && 'message' in body ? String((body as { message: unknown }).message) : JSON.stringify(body).slice(0, 300)}`,
    );
    this.status = status;
    this.body = body;
  }
}

/** One line for logs and status: an API error's status and body, or any error's (or error event's) message. */
export function errorText(e: unknown): string {
  if (e instanceof ApiError) return `${e.status}: ${JSON.stringify(e.body ?? e.message).slice(0, 300)}`;
  if (e instanceof Error) return e.message;
  // an error event (a WebSocket's, as @kubernetes/client-node's exec rejects with) carries a message
  if (typeof e === 'object' && e !== null && 'message' in e)
    return String((e as { message: unknown }).message);
  return String(e);
}

/**
 * GET the first of `paths` the server serves (versions of one resource, preferred first): a 404 moves
 * to the next; any other error is thrown; when none is served, the last 404 is. Returns which one
 * answered and its body.
 */
export async function getFirstServed<T>(
  client: Pick<KubeClient, 'request'>,
  paths: readonly string[],
): Promise<{ index: number; body: T }> {
  for (const [index, path] of paths.entries()) {
    try {
      return { index, body: await client.request<T>('GET', path) };
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404) || index === paths.length - 1) throw e;
    }
  }
  throw new Error('getFirstServed: no path');
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    generation?: number;
    creationTimestamp?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    deletionTimestamp?: string;
    managedFields?: { manager?: string; operation?: string; subresource?: string }[];
  };
  spec?: unknown;
  status?: unknown;
}

export class KubeClient {
  readonly kc: KubeConfig;
  /** How long an answered watch may stay silent before it is resumed (tests shorten it). */
  watchIdleMs = WATCH_IDLE_MS;
  /** Counts of requests by verb, for metrics and tests. */
  readonly requests = new Map<string, number>();

  constructor(kc: KubeConfig) {
    this.kc = kc;
  }

  private async options(method: string, path: string, headers: Record<string, string>) {
    const cluster = this.kc.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    const url = new URL(cluster.server + path);
    // No pooled keep-alive sockets: after an API server restart they would hang until a timeout.
    const opts: Record<string, unknown> = {
      method,
      host: url.hostname,
      port: url.port || 443,
      path: url.pathname + url.search,
      agent: false,
      headers: { accept: 'application/json', ...headers },
    };
    await this.kc.applyToHTTPSOptions(opts as never);
    if (cluster.skipTLSVerify) opts.rejectUnauthorized = false;
    return opts;
  }

  async request<T = unknown>(
    method: string,
    path: string,
    body?: unknown,
    contentType = 'application/json',
  ): Promise<T> {
    this.requests.set(method, (this.requests.get(method) ?? 0) + 1);
    const data =
      body === undefined ? undefined : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
    const opts = await this.options(
      method,
      path,
      data ? { 'content-type': contentType, 'content-length': String(data.length) } : {},
    );
    const { request } = await import('node:https'); // loaded on first use: a CLI run without a cluster never pays for it
    return new Promise<T>((resolve, reject) => {
      const req = request(opts as never, (res) => {
        const chunks: Buffer[] = [];
        res.on('error', reject);
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = text;
          try {
            parsed = text ? JSON.parse(text) : undefined;
          } catch {}
          if ((res.statusCode ?? 500) >= 300)
            reject(new ApiError(res.statusCode ?? 0, parsed, `${method} ${path}`));
          else resolve(parsed as T);
        });
      });
      req.setTimeout(10_000, () => req.destroy(new Error(`${method} ${path}: timeout`)));
      req.on('error', reject);
      if (data) req.write(data);
      req.end();
    });
  }

  /**
   * A watch stream: calls onEvent per event; resolves when the server closes it, rejects on errors
   * (including 410 Gone, as an ApiError). abort() ends it.
   */
  async watch(
    path: string,
    onEvent: (type: string, obj: KubeObject) => void,
    signal: AbortSignal,
  ): Promise<void> {
    this.requests.set('WATCH', (this.requests.get('WATCH') ?? 0) + 1);
    const opts = await this.options('GET', path, {});
    const { request } = await import('node:https');
    return new Promise<void>((resolve, reject) => {
      let answered = false;
      let idle: WatchIdle | undefined;
      const req = request({ ...(opts as object), signal } as never, (res) => {
        answered = true;
        if ((res.statusCode ?? 500) >= 300) {
          let text = '';
          res.on('data', (c) => {
            text += String(c);
          });
          res.on('end', () => reject(new ApiError(res.statusCode ?? 0, text, `WATCH ${path}`)));
          return;
        }
        const rl = createInterface({ input: res });
        rl.on('error', () => {}); // the same error reaches res's handler below
        rl.on('line', (line) => {
          if (!line.trim()) return;
          const ev = JSON.parse(line) as { type: string; object: KubeObject & { code?: number } };
          if (ev.type === 'ERROR') {
            req.destroy();
            reject(new ApiError(ev.object.code ?? 500, ev.object, `WATCH ${path}`));
            return;
          }
          onEvent(ev.type, ev.object);
        });
        res.on('end', () => resolve());
        res.on('error', (e) => (signal.aborted ? resolve() : reject(idle ?? e)));
        res.on('aborted', () =>
          signal.aborted ? resolve() : reject(idle ?? new Error(`WATCH ${path}: connection lost`)),
        );
      });
      // Silence. Before the server answered: a server that cannot be reached, a failure. After it
      // answered: an idle watch, which kube-apiserver leaves silent for as long as nothing changes
      // and its cache has no progress from etcd to send as a bookmark (minutes, for a kind nobody
      // writes); the caller resumes it (WatchIdle), and a server that vanished fails that new request.
      const secs = this.watchIdleMs / 1000;
      req.setTimeout(this.watchIdleMs, () => {
        if (answered) idle = new WatchIdle(`WATCH ${path}: no data for ${secs} s`);
        req.destroy(idle ?? new Error(`WATCH ${path}: no answer in ${secs} s`));
      });
      req.on('error', (e) => (signal.aborted ? resolve() : reject(idle ?? e)));
      req.end();
    });
  }

  /** Server-side apply with our field manager (force: we own the fields we write). */
  apply(path: string, obj: unknown, fieldManager: string): Promise<KubeObject> {
    return this.request(
      'PATCH',
      `${path}?fieldManager=${encodeURIComponent(fieldManager)}&force=true`,
      obj,
      'application/apply-patch+yaml',
    );
  }
}
