// Generated names and label values that are valid for any valid input. Kubernetes object names are
// DNS subdomains (<= 253 characters), label values at most 63 characters of [A-Za-z0-9_.-] that start
// and end alphanumeric. Targets' names may be 253 characters long, so anything built from them is
// hashed-and-truncated, as Kubernetes controllers do; the full reference goes into an annotation.
import { createHash } from 'node:crypto';

export const hashOf = (text: string | Uint8Array, chars = 10): string =>
  createHash('sha256').update(text).digest('hex').slice(0, chars);

const LABEL_VALUE = /^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;
const SUBDOMAIN = /^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*$/;

/** `text` when it is a valid label value; else a readable prefix of it and a hash of all of it. */
export function labelValue(text: string): string {
  if (text.length <= 63 && LABEL_VALUE.test(text)) return text;
  const prefix = text
    .slice(0, 52)
    .replace(/[^-A-Za-z0-9_.]+/g, '-')
    .replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '');
  return prefix ? `${prefix}-${hashOf(text)}` : hashOf(text);
}

/**
 * A DNS-subdomain object name from `text`: itself when valid and at most `max` characters, else a
 * readable prefix and a hash of the whole text. With `key`, the hash is always added and covers the
 * key: for names of objects identified by several parts that may themselves contain a separator.
 */
export function objectName(text: string, opts: { max?: number; key?: string } = {}): string {
  const max = opts.max ?? 253;
  if (opts.key === undefined && text.length <= max && SUBDOMAIN.test(text)) return text;
  const prefix = text
    .toLowerCase()
    .slice(0, max - 11)
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
  const h = hashOf(opts.key ?? text);
  return prefix ? `${prefix}-${h}` : h;
}
