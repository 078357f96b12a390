// The node agent's options (agent.ts): what main.ts builds from the flags, and tests set directly.
import type { Datapath, InterfaceResolver } from '@cascade/bpf-datapath';
import type { BindAddress, KubeClient, Logger } from '@cascade/core/kube';
import type { ServiceBudget } from '../engine/service-budget.ts';

export interface AgentOptions {
  client: KubeClient;
  /** This node's name: its local pods are the endpoints this datapath enforces. */
  node: string;
  datapath: Datapath;
  log?: Logger;
  /** /metrics, /healthz, /readyz and /flows on 127.0.0.1 at this port (tests; 0 picks one). */
  metricsPort?: number;
  /** The same on a bind address (the binary's --metrics-bind-address); wins over metricsPort. */
  metricsBindAddress?: BindAddress;
  /** Finds local pods' host-side interfaces (default: from the kernel and cascade-cni's records). */
  interfaces?: InterfaceResolver;
  /** cascade-cni's record directory (default /run/cascade/cni; see bpf-datapath interfaces.ts). */
  cniRecordDir?: string;
  /** The node's CNI configuration directory: whether cascade-cni is chained there goes in the node's report. */
  cniConfDir?: string;
  /** The agent's version and its BPF program's digest, for the node's report (`cascadectl doctor`). */
  identity?: { version: string; program: string };
  /**
   * Attach the programs to the interfaces found (default true). false where another component owns
   * attachments, or in tests that run packets through BPF_PROG_TEST_RUN only.
   */
  manageAttachments?: boolean;
  /**
   * Rewrite the preferred source of the kernel routes to this node's pod bridges to the node's
   * InternalIP, so that the node's own traffic to its pods (kubelet probes) is judged as the node,
   * which NetworkPolicy never blocks (agent/host-source.ts says why). Default false here (tests run
   * on the machine's own routes); the agent binary's `--prefer-node-source` defaults to true.
   */
  preferNodeSource?: boolean;
  /**
   * Policy map entries the NetworkPolicies of one namespace may add on this node (default 100,000 of
   * the map's 1,048,576): over it the namespace's largest NetworkPolicy is refused alone (isolation
   * kept).
   */
  namespaceEntryBudget?: number;
  /**
   * Label sets per namespace that other namespaces' NetworkPolicies select one by one (default
   * DEFAULT_FOREIGN_IDENTITY_CAP, 512; engine/identity-cap.ts). Must equal the controller's.
   */
  foreignIdentityCap?: number;
  /** The namespace label naming tenants (engine/tenants.ts); '' for none. */
  tenantLabel?: string;
  /**
   * Service frontends and backend slots one namespace may take in this node's maps, and the namespaces
   * served first without a budget (default DEFAULT_SERVICE_BUDGET: 2048, 16,384, kube-system). A
   * Service over its namespace's budget is refused alone: untranslated, its ClusterIPs fail closed.
   */
  serviceBudget?: ServiceBudget;
  /** Entries the staged set's own rule sets may add on this node (--staged-entry-budget; datapathState). */
  stagedEntryBudget?: number;
  /** Namespaces whose allowed flows are reported too (--audit-namespaces; see datapathState). */
  auditNamespaces?: readonly string[];
  /**
   * Where the pods come from (default 'pods'): every Pod of the cluster, or 'slices': the
   * PodAddressSlices the netpolicy-controller publishes (slices.ts), every node's, and no Pod object
   * but those of `ownNamespace`.
   */
  podSource?: 'pods' | 'slices';
  /**
   * With 'slices': the agent's own (release) namespace, whose Pods it reads directly (a Role, not a
   * cluster-wide grant): Cascade's own controllers are known, and enforced, without waiting for the
   * slices they publish, so an upgrade can never wait on itself.
   */
  ownNamespace?: string;
}
