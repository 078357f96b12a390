// @cascade/core/kube: the Kubernetes kit every Cascade binary runs on (gateway controllers, the
// wiring-controller, netpolicy's controller and agent). Nothing here knows a policy. One module per line.

// a binary's flags, kubeconfig and SIGTERM
export { binary, CONTROLLER_FLAGS, CONTROLLER_USAGE, controllerSettings, runUntilSigterm } from './binary.ts';
// the API client (server-side apply, watch streams)
export { ApiError, errorText, getFirstServed, KubeClient, type KubeObject } from './client.ts';
// Warning Events on an object
export { type InvolvedObject, postWarningEvent } from './events.ts';
// /metrics, /healthz, /readyz on bind addresses; watch failures counted and logged
export { type BindAddress, parseBindAddress, watchHealth } from './health.ts';
// list+watch caches
export { Informer, type InformerEvent, startInformers } from './informer.ts';
// Lease-based leader election, and as a controller runs it (metrics, log lines)
export { LeaderElector } from './leader.ts';
export { electedLeader } from './leadership.ts';
// JSON log lines
export { jsonLogger, type Logger } from './logging.ts';
// prom-client registry per process
export { Metrics } from './metrics.ts';
// a controller process: informers, endpoints, resync, readiness, leadership, graceful stop
export { ControllerProcess, type ProcessOptions } from './process.ts';
// a rate-limited, deduplicating work queue (controller-runtime's names)
export { WorkQueue } from './queue.ts';
// OpenTelemetry spans exported as OTLP JSON
export { setupTracing } from './tracing.ts';
