// What one run of `netpol simulate --probes` remembers, so that a probe costs the same whatever the
// size of the cluster: whole results by the pair of identities that decides them, and each direction's
// decision by the judging pod's class (judgementClass) and the remote identity, since many pods share
// the rules that select them while the pairs they form are nearly all new in a random probe set.
import {
  type Decision,
  type Direction,
  evaluateDirection,
  judgementClass,
  type NetpolEngine,
  type Pod,
  probeRuleSet,
  type RuleSet,
  remoteOf,
} from '@cascade/netpolicy';

export function describeDecision(d: Decision | undefined) {
  if (!d) return undefined;
  return {
    verdict: d.verdict,
    decidedBy: {
      tier: d.tier,
      ...(d.policy ? { policy: d.policy } : {}),
      ...(d.rule ? { rule: d.rule } : {}),
      ...(d.priority !== undefined ? { priority: d.priority } : {}),
      ...(d.passedBy ? { passedBy: d.passedBy } : {}),
    },
  };
}

export type Described = NonNullable<ReturnType<typeof describeDecision>>;

export interface ProbeResult {
  from: string;
  to: string;
  protocol: string;
  port: number;
  verdict: 'allow' | 'deny';
  /** A Service destination: this result is for one of its backends (`to`, on its own `port`). */
  service?: {
    name: string;
    frontend: string;
    backend?: string;
    note?: string;
    /** a NodePort flow kube-proxy forwarded: the source the backend saw (masquerade) */
    source?: string;
  };
  egress?: Described;
  ingress?: Described;
}

/** One direction's decision, described, and that as JSON; `id` numbers the distinct ones of a memo. */
export interface Judged {
  described: Described;
  json: string;
  id: number;
}

/** An address's pod and identity, when probes from or to it may be remembered. */
export type MemoAddr = { readonly pod: Pod; readonly id: number };
type Addr = MemoAddr;
/** A remembered result: all but its pair's names, and its JSON after `"to":...,`. */
export type Remembered = { decided: Omit<ProbeResult, 'from' | 'to'>; tail: string };

const LOW = 1 << 20;

/**
 * A map by a key of up to 52 bits, kept as its high part then its low 20 bits (same pod, protocol,
 * port): two small-integer lookups rather than one by a number V8 keeps as a heap number. Cleared
 * whole when it holds ProbeMemo.MAX entries.
 */
class SplitMap<V> {
  private readonly m = new Map<number, Map<number, V>>();
  private size = 0;

  get(key: number): V | undefined {
    const high = Math.floor(key / LOW);
    return this.m.get(high)?.get(key - high * LOW);
  }

  set(key: number, v: V): void {
    if (this.size >= ProbeMemo.MAX) this.clear();
    const high = Math.floor(key / LOW);
    let low = this.m.get(high);
    if (!low) this.m.set(high, (low = new Map()));
    const k = key - high * LOW;
    if (!low.has(k)) this.size++;
    low.set(k, v);
  }

  clear(): void {
    this.m.clear();
    this.size = 0;
  }
}

/** A key for a decision's content: each part with its length, so no name can pass for two. */
const contentKey = (d: Decision) => {
  const part = (s: string | undefined) => (s === undefined ? '-' : `${s.length}:${s}`);
  return `${d.verdict}|${d.tier}|${part(d.policy)}|${part(d.rule)}|${d.priority ?? '-'}|${d.passedBy ? d.passedBy.map(part).join('') : '-'}`;
};

/**
 * Decisions of one run's probes by what decides them. For two pods (neither address a node's) a whole
 * result is decided by their identities (namespace, its labels, pod labels, named ports, ANP network
 * prefixes: everything the rules read), whether they are the same pod, the protocol and the port; a
 * direction's decision by the judging pod's class instead of its identity. Capped identities (one id
 * for several label sets) are never remembered. Bounded: each map is cleared when it holds MAX
 * entries. The engine must not change while a memo is in use (one per run of the command).
 */
export class ProbeMemo {
  static readonly MAX = 200_000;
  private readonly m = new SplitMap<Remembered>();
  private readonly dirs: Record<Direction, SplitMap<Judged>> = {
    egress: new SplitMap(),
    ingress: new SplitMap(),
  };
  /**
   * The distinct decisions met, by content: a direction's JSON is made once per deciding rule, and
   * results decided alike share their text (tails: by both directions, the protocol and the port).
   */
  private readonly judgedByContent = new Map<string, Judged>();
  private readonly tails = new SplitMap<string>();
  private nextJudged = 0;
  /** small numbers for the identities, classes and protocols met, so that a key is one number (52 bits) */
  private readonly idIndex = new Map<number, number>();
  private readonly classIndex = new Map<string, number>();
  private readonly protoIndex = new Map<number, number>();
  /** each pod's rule set and class by direction (the engine does not change under a memo) */
  private readonly podClass: Record<Direction, Map<Pod, { at: RuleSet; c: number | undefined }>> = {
    egress: new Map(),
    ingress: new Map(),
  };
  /** address -> its pod and identity when probes from or to it may be remembered, else null */
  private readonly addrs = new Map<string, Addr | null>();
  /** the pair keyOf last gave a key for (fields, not an object: keyOf runs for every probe) */
  private pa?: Addr;
  private pb?: Addr;
  private pia = 0;
  private pib = 0;
  private psame = 0;
  private pip = 0;
  hits = 0;
  /** Judgements made (misses of whole results): the lowering check samples them. */
  judged = 0;
  /** Directions judged afresh (misses of both memos). */
  directionsJudged = 0;
  /** The last result simulateProbe returned with the memo, and its JSON after `"to":...,` */
  last?: { result: ProbeResult; tail: string };

  /** The address's pod and identity when probes from or to it may be remembered, else null. */
  addr(engine: NetpolEngine, ip: string): Addr | null {
    let a = this.addrs.get(ip);
    if (a !== undefined) return a;
    const pod = engine.podAt(ip);
    const id = pod && !engine.nodeAt(ip) ? engine.podIdentity.get(`${pod.namespace}/${pod.name}`) : undefined;
    a = pod && id !== undefined && !engine.identities.get(id)?.capped ? { pod, id } : null;
    if (this.addrs.size >= ProbeMemo.MAX) this.addrs.clear();
    this.addrs.set(ip, a);
    return a;
  }

  /** `v`'s small number in `index`, given in order met; undefined once `max` are taken. */
  private static small<K>(index: Map<K, number>, v: K, max: number): number | undefined {
    let i = index.get(v);
    if (i === undefined && index.size < max) index.set(v, (i = index.size));
    return i;
  }

  /** The decision's key: 16 bits per identity, the same-pod bit, 3 for the protocol, 16 for the port. */
  keyOf(engine: NetpolEngine, src: string, dst: string, proto: number, port: number): number | undefined {
    this.pa = this.pb = undefined;
    const a = this.addr(engine, src);
    const b = a && this.addr(engine, dst);
    return a && b ? this.keyOfAddrs(a, b, proto, port) : undefined;
  }

  /** keyOf for two addresses `addr` gave. */
  keyOfAddrs(a: Addr, b: Addr, proto: number, port: number): number | undefined {
    this.pa = this.pb = undefined;
    const ia = ProbeMemo.small(this.idIndex, a.id, 1 << 16);
    const ib = ProbeMemo.small(this.idIndex, b.id, 1 << 16);
    const ip = ProbeMemo.small(this.protoIndex, proto, 8);
    if (ia === undefined || ib === undefined || ip === undefined) return undefined;
    const same = a.pod === b.pod ? 1 : 0;
    this.pa = a;
    this.pb = b;
    this.pia = ia;
    this.pib = ib;
    this.psame = same;
    this.pip = ip;
    return (((ia * 65536 + ib) * 2 + same) * 8 + ip) * 65536 + port;
  }

  get(key: number): Remembered | undefined {
    const r = this.m.get(key);
    if (r) this.hits++;
    return r;
  }

  /**
   * Both directions of the pair keyOf just gave a key for, each from its own memo or judged now
   * (evaluateDirection on the pod's own rule set, exactly as oracleConnection judges it).
   */
  judgePair(
    engine: NetpolEngine,
    src: string,
    dst: string,
    proto: number,
    port: number,
  ): { egress: Judged; ingress: Judged } {
    const a = this.pa!;
    const b = this.pb!;
    return {
      egress: this.direction(engine, a.pod, dst, this.pib, 'egress', this.psame, this.pip, proto, port),
      ingress: this.direction(engine, b.pod, src, this.pia, 'ingress', this.psame, this.pip, proto, port),
    };
  }

  /** The pod's rule set in `d` and its class's small number (undefined past 65,536 classes). */
  private classOf(engine: NetpolEngine, local: Pod, d: Direction): { at: RuleSet; c: number | undefined } {
    let known = this.podClass[d].get(local);
    if (!known) {
      const rs = probeRuleSet(engine);
      const at = rs.forLocal?.(local, d) ?? rs;
      known = { at, c: ProbeMemo.small(this.classIndex, judgementClass(at, local, d), 1 << 16) };
      this.podClass[d].set(local, known);
    }
    return known;
  }

  private direction(
    engine: NetpolEngine,
    local: Pod,
    remoteIp: string,
    remoteIndex: number,
    d: Direction,
    same: number,
    protoIndex: number,
    proto: number,
    port: number,
  ): Judged {
    const { at, c } = this.classOf(engine, local, d);
    const memo = this.dirs[d];
    const key =
      c === undefined ? undefined : (((c * 65536 + remoteIndex) * 2 + same) * 8 + protoIndex) * 65536 + port;
    const known = key === undefined ? undefined : memo.get(key);
    if (known) return known;
    this.directionsJudged++;
    const judged = this.intern(evaluateDirection(at, local, remoteOf(engine, remoteIp), d, proto, port));
    if (key !== undefined) memo.set(key, judged);
    return judged;
  }

  /** The memo's one Judged for a decision of this content. */
  private intern(decision: Decision): Judged {
    const k = contentKey(decision);
    let j = this.judgedByContent.get(k);
    if (!j) {
      if (this.judgedByContent.size >= ProbeMemo.MAX) this.judgedByContent.clear();
      const described = describeDecision(decision)!;
      // ids never repeat (a cleared map's ones stay in use in the other memos)
      j = { described, json: JSON.stringify(described), id: this.nextJudged++ };
      this.judgedByContent.set(k, j);
    }
    return j;
  }

  /**
   * Remembers the result of the pair keyOf just gave `key` for, decided by `judged` (its directions as
   * judgePair gave them): its text is put together from theirs, once for each pair of directions,
   * protocol and port, rather than serialised again.
   */
  remember(
    key: number,
    decided: Omit<ProbeResult, 'from' | 'to' | 'service'>,
    judged: { egress: Judged; ingress: Judged },
  ): Remembered {
    const { egress, ingress } = judged;
    // 16 bits per id, so that the key stays below 2^52 (past them, the text is this result's alone)
    const tk =
      egress.id < 65536 && ingress.id < 65536
        ? (egress.id * 65536 + ingress.id) * LOW + this.pip * 65536 + decided.port
        : undefined;
    let tail = tk === undefined ? undefined : this.tails.get(tk);
    if (tail === undefined) {
      tail = `"protocol":${JSON.stringify(decided.protocol)},"port":${decided.port},"verdict":"${decided.verdict}","egress":${egress.json},"ingress":${ingress.json}}`;
      if (tk !== undefined) this.tails.set(tk, tail);
    }
    const r = { decided, tail };
    this.m.set(key, r);
    return r;
  }

  /** `r` as JSON: from the remembered text when it is the result simulateProbe just gave. */
  json(r: ProbeResult): string {
    if (this.last?.result !== r) return JSON.stringify(r);
    return `{"from":${JSON.stringify(r.from)},"to":${JSON.stringify(r.to)},${this.last.tail}`;
  }
}
