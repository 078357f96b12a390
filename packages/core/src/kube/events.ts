// Warning Events on the objects a controller or agent reports about (best effort: the log line and
// the metric are the record, an Event that cannot be written is only logged by the caller). Event
// names are generated from ours, never from user text beyond a cut object name.
import type { KubeClient } from './client.ts';

export interface InvolvedObject {
  apiVersion: string;
  kind: string;
  /** '' for a cluster-scoped object (a Namespace, a Node): its Events live in `default`. */
  namespace: string;
  name: string;
}

export function postWarningEvent(
  client: KubeClient,
  involvedObject: InvolvedObject,
  reason: string,
  message: string,
  source: { component: string; host?: string },
): Promise<unknown> {
  const now = new Date().toISOString();
  const suffix = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
  // The API server keeps a cluster-scoped object's Events in `default`, with no involved namespace.
  const ns = involvedObject.namespace || 'default';
  const { namespace: _ns, ...cluster } = involvedObject;
  return client.request('POST', `/api/v1/namespaces/${encodeURIComponent(ns)}/events`, {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { name: `${involvedObject.name.slice(0, 200)}.${suffix}`, namespace: ns },
    involvedObject: involvedObject.namespace ? involvedObject : cluster,
    reason,
    message: message.slice(0, 1024),
    type: 'Warning',
    source,
    ...(source.host ? { reportingInstance: source.host.slice(0, 128) } : {}),
    reportingComponent: source.component,
    firstTimestamp: now,
    lastTimestamp: now,
    count: 1,
  });
}
