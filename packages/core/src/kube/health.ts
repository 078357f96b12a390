// A controller's or agent's health as the cluster sees it: the HTTP endpoints (/metrics, /healthz,
// /readyz) on controller-runtime style bind addresses, and watch failures counted and logged once
// when they start and once when they recover, never per retry.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Informer } from './informer.ts';
import type { Logger } from './logging.ts';
import type { Metrics } from './metrics.ts';

/** More routes on the same server (e.g. the agent's /flows): true when it answered. */
export type ExtraRoutes = (req: IncomingMessage, res: ServerResponse) => boolean;

export interface BindAddress {
  /** undefined: every address of the host (IPv4 and IPv6). */
  host?: string;
  port: number;
}

/**
 * A controller-runtime style bind address: `:8080` (all addresses), `127.0.0.1:8080`, `[::1]:8080`;
 * `0` disables (undefined). Throws on anything else, naming the flag.
 */
export function parseBindAddress(text: string, flag: string): BindAddress | undefined {
  if (text === '0') return undefined;
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([0-9A-Za-z.-]*)):(\d{1,5})$/.exec(text);
  const port = m ? Number(m[3]) : Number.NaN;
  if (!m || port > 65535)
    throw new Error(
      `${flag}: "${text}" is not a bind address (e.g. ":8080", "127.0.0.1:8080", "0" to disable)`,
    );
  const host = m[1] ?? m[2];
  return host ? { host, port } : { port };
}

/**
 * Serves on a bind address: `what` is 'metrics' (/metrics from `source`), 'probes' (/healthz,
 * /readyz: ready() decides) or 'all'. Rejects when the address cannot be bound (in use, not an
 * address of this host).
 */
export function serveHttp(
  source: { render(): Promise<string>; contentType: string },
  addr: BindAddress,
  ready: () => boolean,
  what: 'metrics' | 'probes' | 'all',
  extra?: ExtraRoutes,
): Promise<Server> {
  const metrics = what !== 'probes';
  const probes = what !== 'metrics';
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (extra?.(req, res)) return;
    if (metrics && path === '/metrics') {
      source.render().then(
        (text) => {
          res.writeHead(200, { 'content-type': source.contentType });
          res.end(text);
        },
        (e: unknown) => {
          res.writeHead(500);
          res.end(String(e));
        },
      );
    } else if (probes && path === '/healthz') {
      res.writeHead(200);
      res.end('ok');
    } else if (probes && path === '/readyz') {
      const ok = ready();
      res.writeHead(ok ? 200 : 503);
      res.end(ok ? 'ok' : 'not ready');
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(addr.port, addr.host, () => resolve(server));
  });
}

/**
 * The HTTP endpoints of a controller or agent: `port` serves /metrics, /healthz and /readyz on
 * 127.0.0.1 (tests); controller-runtime's --metrics-bind-address serves /metrics and
 * --health-probe-bind-address /healthz and /readyz.
 */
export async function serveEndpoints(
  metrics: Metrics,
  at: { metricsPort?: number; metricsBindAddress?: BindAddress; healthProbeBindAddress?: BindAddress },
  ready: () => boolean,
): Promise<Server[]> {
  const servers: Server[] = [];
  if (at.metricsPort !== undefined) servers.push(await metrics.serve(at.metricsPort, ready));
  if (at.metricsBindAddress) servers.push(await metrics.serveOn(at.metricsBindAddress, ready, 'metrics'));
  if (at.healthProbeBindAddress)
    servers.push(await metrics.serveOn(at.healthProbeBindAddress, ready, 'probes'));
  return servers;
}

/**
 * cascade_watch_errors_total over `informers`, and a log line when one starts failing (`meanwhile`
 * says what that means for this process) and when it recovers; then `recovered` runs (work left
 * pending while not ready).
 */
export function watchHealth(
  informers: readonly Informer[],
  metrics: Metrics,
  log: Logger,
  meanwhile: string,
  recovered: () => void = () => {},
): void {
  const watchErrors = metrics.counter(
    'cascade_watch_errors_total',
    'List and watch errors (the informer retries with backoff)',
  );
  for (const inf of informers) {
    inf.onError = () => watchErrors.inc();
    inf.onVersion = (path) => log('info', 'reading the version served', { path, versions: inf.paths });
    inf.onHealth = (path, error) => {
      if (error) {
        log('warn', `list/watch failing: retrying with backoff; ${meanwhile}`, { path, error });
        return;
      }
      log('info', 'list/watch recovered', { path });
      recovered();
    };
  }
}
