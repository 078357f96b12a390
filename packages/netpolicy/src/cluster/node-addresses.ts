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
  private readonly tunnels = new Map<string, readonly string[]>();
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

  /** The node's report's tunnel addresses (undefined: none, or the report deleted). */
  report(name: string, tunnels?: readonly string[]): void {
    const before = JSON.stringify(this.tunnels.get(name) ?? []);
    if (tunnels?.length) this.tunnels.set(name, tunnels);
    else this.tunnels.delete(name);
    if (JSON.stringify(tunnels ?? []) !== before) this.push(name);
  }

  private push(name: string): void {
    const n = this.nodes.get(name);
    if (n) this.engine.upsertNode({ ...n, ips: [...new Set([...n.ips, ...(this.tunnels.get(name) ?? [])])] });
  }
}
