// Per-object publishing: one object's failed write never stalls the others. Every write of a lane
// runs (at most n in flight); each failure is recorded against the object with the API server's
// message and the policies whose rules the object carries, so their status can say
// `Enforced=False, PublishFailed` naming it; the object is retried on its own with backoff when the
// failure is transient (conflicts, throttling, server errors, the network), and after its input
// changes (or at the next full resync) when the API server refused it (4xx: invalid, too large,
// forbidden): never in a hot loop. Objects larger than the API server takes are refused before
// they are sent.
import type { PolicyKind } from '../kind.ts';
import { ApiError, type KubeClient } from '../kube/client.ts';
import type { Logger } from '../kube/logging.ts';
import type { Metrics } from '../kube/metrics.ts';
import type { PolicyEngine } from '../merge/engine.ts';

/** Serialized bytes an object may have (etcd takes ~1.5 MB requests; a ConfigMap's data 1 MiB). */
export const MAX_OBJECT_BYTES = 1_000_000;

export interface PublishFailure {
  /** `Kind namespace/name` of the object that could not be written. */
  object: string;
  message: string;
  /** HTTP status (0: no answer, -1: refused here before sending). */
  status: number;
  /** Policy ids whose rules the object carries. */
  policies: string[];
  attempts: number;
  /** Refused by the API server (or here): retried when its input changes, not on a timer. */
  permanent: boolean;
}

/** What every writer of a policy controller shares. */
export interface WriterDeps {
  engine: PolicyEngine;
  client: KubeClient;
  kind: PolicyKind;
  /** The controller's name: field manager and EffectivePolicy owner label. */
  name: string;
  ledger: PublishLedger;
  /** Writes issued, and skipped because the live object already matched. */
  writes: ReturnType<Metrics['counter']>;
  skipped: ReturnType<Metrics['counter']>;
  /** API writes in flight at once. */
  writeConcurrency: number;
}

export class ObjectTooLarge extends Error {}

/** Throws when an object would be larger than the API server takes; its size in bytes otherwise. */
export function checkSize(obj: unknown, limit = MAX_OBJECT_BYTES): number {
  return checkTextSize(JSON.stringify(obj), limit);
}

/** checkSize of an object already serialised. */
export function checkTextSize(text: string, limit = MAX_OBJECT_BYTES): number {
  const n = Buffer.byteLength(text);
  if (n > limit)
    throw new ObjectTooLarge(
      `object too large: ${n.toLocaleString('en')} bytes (the limit is ${limit.toLocaleString('en')})`,
    );
  return n;
}

function describe(e: unknown): { status: number; message: string } {
  if (e instanceof ObjectTooLarge) return { status: -1, message: e.message };
  if (e instanceof ApiError) {
    const body = e.body as { message?: string } | undefined;
    return { status: e.status, message: (body?.message ?? e.message).slice(0, 500) };
  }
  return { status: 0, message: String(e instanceof Error ? e.message : e).slice(0, 500) };
}

/**
 * Worth retrying on a timer: no answer, conflicts, throttling, server errors, and a namespace's
 * ResourceQuota (403 "exceeded quota": freed or raised by someone, as Kubernetes' own controllers
 * retry it). Other refusals wait for their input to change.
 */
const transient = (status: number, message: string) =>
  status === 0 ||
  status === 409 ||
  status === 429 ||
  status >= 500 ||
  (status === 403 && message.includes('exceeded quota'));

export class PublishLedger {
  readonly failures = new Map<string, PublishFailure>();
  private readonly failed: ReturnType<Metrics['counter']>;
  /** Called when an object starts or stops failing (or its message changes). */
  onChange: (object: string, failure: PublishFailure | undefined, policies: string[]) => void = () => {};

  constructor(metrics: Metrics) {
    this.failed = metrics.counter(
      'cascade_publish_failures_total',
      "Object writes that failed (each retried on its own; see the policies' Enforced condition)",
    );
    metrics.gauge(
      'cascade_publish_failing_objects',
      'Objects whose last write failed',
      () => this.failures.size,
    );
  }

  /**
   * Runs `f` over every item, at most `n` in flight; a failure never stops the others. `what` names
   * the object an item writes and the policies it carries. Returns the items that failed.
   */
  async each<T>(
    items: Iterable<T>,
    n: number,
    what: (item: T) => { object: string; policies: () => string[] },
    f: (item: T) => Promise<void>,
  ): Promise<{ item: T; failure: PublishFailure }[]> {
    const it = items[Symbol.iterator]();
    const out: { item: T; failure: PublishFailure }[] = [];
    const worker = async () => {
      for (let next = it.next(); !next.done; next = it.next()) {
        const w = what(next.value);
        try {
          await f(next.value);
          this.succeeded(w.object);
        } catch (e) {
          out.push({ item: next.value, failure: this.record(w.object, e, w.policies()) });
        }
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, n) }, worker));
    return out;
  }

  private record(object: string, e: unknown, policies: string[]): PublishFailure {
    const { status, message } = describe(e);
    const prev = this.failures.get(object);
    const failure: PublishFailure = {
      object,
      message,
      status,
      policies,
      attempts: (prev?.attempts ?? 0) + 1,
      permanent: !transient(status, message),
    };
    this.failures.set(object, failure);
    this.failed.inc();
    if (!prev || prev.message !== message) this.onChange(object, failure, policies);
    return failure;
  }

  private succeeded(object: string): void {
    const prev = this.failures.get(object);
    if (!prev) return;
    this.failures.delete(object);
    this.onChange(object, undefined, prev.policies);
  }

  /** Backoff before a transient failure is retried: 0.5 s doubling to 60 s. */
  static backoffMs(f: PublishFailure): number {
    return Math.min(60_000, 500 * 2 ** Math.min(f.attempts - 1, 7));
  }

  /** Objects carrying a policy's rules that could not be written. */
  forPolicy(id: string): PublishFailure[] {
    return [...this.failures.values()].filter((f) => f.policies.includes(id));
  }
}

/** The log line of a ledger change: a write that started failing (retried on its own) or recovered. */
export function logPublishChange(
  log: Logger,
  object: string,
  failure: PublishFailure | undefined,
  fields: Record<string, unknown> = {},
): void {
  if (failure)
    log('warn', 'publish failed: the object is retried on its own, the others go on', {
      object,
      status: failure.status,
      error: failure.message,
      ...fields,
    });
  else log('info', 'published after failing', { object });
}
