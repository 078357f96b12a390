// Each node's addresses as the engine gets them (plain data: the agent, the controller and
// `cascadectl netpol` build them alike).
import type { NetpolEngine } from '../engine/engine.ts';
import type { Node } from '../engine/model.ts';

/**
 * Each node's addresses as the engine gets them: its Node's (InternalIP and ExternalIP, first), then
 * the tunnel addresses its agent's report adds (agent/host-source.ts), none of them twice. A report
 * names only its own node (the agent's admission policy), and says nothing of a node not there.
 */
export class NodeAddresses {
  private readonly nodes = new Map<string, Node>();
  private readonly reported = new Map<string, readonly string[]>();
  private readonly engine: Pick<NetpolEngine, 'upsertNode' | 'removeNode'>;
  constructor(engine: Pick<NetpolEngine, 'upsertNode' | 'removeNode'>) {
    this.engine = engine;
  }

  /** The Node object (undefined: deleted). */
  node(name: string, n?: Node): void {
    if (!n) {
      this.nodes.delete(name);
      this.engine.removeNode(name);
      return;
    }
    this.nodes.set(name, n);
    this.push(name);
  }

  /** Each node's tunnel addresses, as its report says (nodes whose report names none are absent). */
  get tunnels(): ReadonlyMap<string, readonly string[]> {
    return this.reported;
  }

  /**
   * The node's report's tunnel addresses (undefined: none, or the report deleted); whether they
   * changed (a report whose findings alone changed changes nothing here).
   */
  report(name: string, tunnels?: readonly string[]): boolean {
    const before = JSON.stringify(this.reported.get(name) ?? []);
    if (tunnels?.length) this.reported.set(name, tunnels);
    else this.reported.delete(name);
    if (JSON.stringify(tunnels ?? []) === before) return false;
    this.push(name);
    return true;
  }

  private push(name: string): void {
    const n = this.nodes.get(name);
    if (n)
      this.engine.upsertNode({ ...n, ips: [...new Set([...n.ips, ...(this.reported.get(name) ?? [])])] });
  }
}
