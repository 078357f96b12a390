// What a node's agent found that someone must hear about: Services its budgets refuse and pod
// addresses two live pods claim (logged and counted once per change), and the findings its
// NetpolNodeReport carries for the controller to relay as Warning Events (refused NetworkPolicies and
// Services, pods whose address a newer pod took).
import type { Logger } from '@cascade/core/kube';
import type { Finding } from '../cluster/node-report.ts';
import type { AddressOwners } from '../cluster/owners.ts';
import type { Refusal } from '../engine/budget.ts';
import type { ServiceCatalog } from '../engine/services.ts';
import { finding } from './report.ts';

interface Counter {
  inc(n?: number): void;
}

interface FindingsDeps {
  node: string;
  services: ServiceCatalog;
  owners: AddressOwners;
  refusedPolicies: ReadonlyMap<string, Refusal>;
  log: Logger;
  serviceRefusals: Counter;
  addressConflicts: Counter;
}

export class NodeFindings {
  /** Services refused now (`ns/name` -> reason), reported once per change. */
  private refusedServices = new Map<string, string>();
  private readonly reportedConflicts = new Set<string>();

  private readonly d: FindingsDeps;

  constructor(d: FindingsDeps) {
    this.d = d;
  }

  get servicesRefused(): number {
    return this.refusedServices.size;
  }

  /**
   * Services the node's budgets leave out (service-budget.ts): logged, counted (and a Warning Event on
   * the Service through the report), once each time a Service becomes refused or its reason changes.
   */
  reportRefusedServices(): void {
    const now = new Map<string, string>();
    for (const r of this.d.services.refused(this.d.node)) {
      now.set(r.service, r.reason);
      if (this.refusedServices.get(r.service) === r.reason) continue;
      this.d.serviceRefusals.inc();
      this.d.log(
        'error',
        'Service refused: not translated on this node, new flows to its ClusterIPs are dropped',
        {
          service: r.service,
          reason: r.reason,
        },
      );
    }
    for (const k of this.refusedServices.keys())
      if (!now.has(k)) this.d.log('info', 'Service translated again', { service: k });
    this.refusedServices = now;
  }

  /** Two live pods claiming one address: logged and counted once per conflict. */
  reportConflicts(): void {
    const now = new Set<string>();
    for (const c of this.d.owners.conflicts()) {
      const id = `${c.address} ${c.owner} ${c.losers.join(',')}`;
      now.add(id);
      if (this.reportedConflicts.has(id)) continue;
      this.d.addressConflicts.inc();
      this.d.log('warn', 'two live pods claim one address: the newest owns it', { ...c });
    }
    this.reportedConflicts.clear();
    for (const id of now) this.reportedConflicts.add(id);
  }

  /**
   * What this node found that a tenant or an admin must hear about, as it stands now. The controller
   * turns each into a Warning Event on the object (the agent has no Event grant: agent/rbac.ts).
   */
  findings(): Finding[] {
    const { node } = this.d;
    const out: Finding[] = [];
    for (const r of this.d.refusedPolicies.values())
      out.push(finding('PolicyMapBudgetExceeded', 'NetworkPolicy', r.namespace, r.original.name, r.reason));
    for (const r of this.d.services.refused(node))
      out.push(
        finding(
          'ServiceBudgetExceeded',
          'Service',
          r.namespace,
          r.name,
          `not translated on node ${node}: ${r.reason}; new connections to its ClusterIPs from this node's pods are dropped`,
        ),
      );
    for (const c of this.d.owners.conflicts())
      for (const loser of c.losers) {
        const [namespace, name] = loser.split('/') as [string, string];
        out.push(
          finding(
            'PodAddressConflict',
            'Pod',
            namespace,
            name,
            `address ${c.address} is also claimed by the newer pod ${c.owner}, which owns it on node ${node}: this pod is not enforced under that address`,
          ),
        );
      }
    return out;
  }
}
