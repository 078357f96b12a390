// Policy objects as they arrive (Kubernetes shape) and as the engine uses them (normalized).
import type { Strategy, TargetRef } from '../kind.ts';
import type { Level } from '../topology/types.ts';
import type { CompiledCondition } from './cel.ts';

export interface PolicyObject {
  apiVersion?: string;
  kind: string;
  metadata: {
    namespace?: string;
    name: string;
    creationTimestamp?: string;
    generation?: number;
    uid?: string;
  };
  spec?: unknown;
}

export interface PolicyRef {
  kind: string;
  namespace: string;
  name: string;
}

export type RuleOrigin = 'default' | 'override' | 'intent';

export interface PolicyRule {
  /** `<section>.<name>` */
  key: string;
  section: string;
  name: string;
  value: unknown;
}

export interface RuleBlock {
  /** `intent` is a bare rule set: merged as an atomic default, labelled as the author wrote it. */
  as: RuleOrigin;
  strategy: Strategy;
  condition?: CompiledCondition;
  rules: PolicyRule[];
  /** Non-rule fields of the rule set that travel with each of its rules (kind's contextFields). */
  context?: Record<string, unknown>;
}

export interface ResolvedTarget {
  ref: TargetRef;
  /** Object key with optional `#section` (see topology/types.ts). */
  key: string;
  level: Level;
}

export interface NormalizedPolicy {
  id: string;
  ref: PolicyRef;
  /** Milliseconds since epoch, or undefined when the manifest carries none. */
  createdAt: number | undefined;
  /** Order of first appearance: stands in for creationTimestamp when there is none. */
  sequence: number;
  generation: number | undefined;
  targets: ResolvedTarget[];
  /** In merge order: defaults (or the bare intent) first, then overrides. */
  blocks: RuleBlock[];
  unset: string[];
}

export const policyId = (ref: PolicyRef): string => `${ref.kind}:${ref.namespace}/${ref.name}`;
export const policyName = (ref: PolicyRef): string => `${ref.namespace}/${ref.name}`;
