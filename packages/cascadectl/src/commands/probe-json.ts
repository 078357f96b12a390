// `netpol simulate --probes -o json`: each probe's results as JSON, written as bytes. A probe between
// two pods whose result the memo already holds is written from bytes kept per name and per result
// text, with no object or string made for it; any other probe is simulated and serialised
// (simulateProbes, memo.json). The output is what JSON.stringify of each result, one per line, in
// an array gives (`[`, items joined by `,\n  `, `\n]\n`).
import type { NetpolEngine, ServiceCatalog } from '@cascade/netpolicy';
import type { ReportedAddresses } from '../netpol-world.ts';
import { judgeKeyed, simulateProbes } from './netpol.ts';
import type { MemoAddr, ProbeMemo } from './probe-memo.ts';
import type { ProbeColumns } from './probes-file.ts';

/** Bytes gathered in chunks and handed to `write` a chunk at a time (never reused after). */
class ByteSink {
  static readonly CHUNK = 1 << 20;
  private buf = Buffer.allocUnsafe(ByteSink.CHUNK);
  private at = 0;
  private readonly write: (b: Buffer) => void;

  constructor(write: (b: Buffer) => void) {
    this.write = write;
  }

  private room(n: number): void {
    if (this.at + n <= this.buf.length) return;
    this.flush();
    if (n > this.buf.length) this.buf = Buffer.allocUnsafe(n);
  }

  bytes(b: Buffer): void {
    this.room(b.length);
    this.buf.set(b, this.at);
    this.at += b.length;
  }

  text(s: string): void {
    this.room(s.length * 3);
    this.at += this.buf.write(s, this.at, 'utf8');
  }

  flush(): void {
    if (this.at === 0) return;
    this.write(this.buf.subarray(0, this.at));
    this.buf = Buffer.allocUnsafe(ByteSink.CHUNK);
    this.at = 0;
  }
}

const OPEN = Buffer.from('[\n  ');
const BETWEEN = Buffer.from(',\n  ');

export class ProbeJson {
  /** per name id: `{"from":NAME,"to":` and `NAME,` as bytes, and its pod's memo address (null: none) */
  private readonly asFrom: Buffer[] = [];
  private readonly asTo: Buffer[] = [];
  private readonly addrs: (MemoAddr | null)[] = [];
  /** per name id with a memo address: the address the name resolves to (resolveAddr's) */
  private readonly ips: string[] = [];
  /** the memo's result texts as bytes (the memo shares one text among results decided alike) */
  private readonly tails = new Map<string, Buffer>();
  private readonly out: ByteSink;
  private items = 0;
  private readonly engine: NetpolEngine;
  private readonly services: ServiceCatalog;
  private readonly reported: ReportedAddresses;
  private readonly memo: ProbeMemo;
  private readonly probes: ProbeColumns;

  constructor(
    engine: NetpolEngine,
    services: ServiceCatalog,
    reported: ReportedAddresses,
    memo: ProbeMemo,
    probes: ProbeColumns,
    write: (b: Buffer) => void,
  ) {
    this.engine = engine;
    this.services = services;
    this.reported = reported;
    this.memo = memo;
    this.probes = probes;
    this.out = new ByteSink(write);
  }

  /** A pod's name (namespace/name): never a Service's or a node's address, which simulateProbes routes. */
  private addrOf(name: number): MemoAddr | null {
    let a = this.addrs[name];
    if (a === undefined) {
      const ip = this.engine.pods.get(this.probes.names[name]!)?.ips[0];
      a = ip ? this.memo.addr(this.engine, ip) : null;
      this.addrs[name] = a;
      if (a) this.ips[name] = ip!;
    }
    return a;
  }

  private next(): void {
    this.out.bytes(this.items++ ? BETWEEN : OPEN);
  }

  /** Probe i's results. */
  write(i: number): void {
    const p = this.probes;
    const from = p.fromId(i);
    const to = p.toId(i);
    const proto = p.protoAt(i);
    const port = p.portCode(i);
    if (port >= 0) {
      const a = this.addrOf(from);
      const b = a && this.addrOf(to);
      const key = a && b ? this.memo.keyOfAddrs(a, b, proto, port) : undefined;
      if (key !== undefined) {
        const known =
          this.memo.get(key) ??
          judgeKeyed(
            this.engine,
            this.memo,
            key,
            this.ips[from]!,
            this.ips[to]!,
            proto,
            port,
            p.names[from]!,
            p.names[to]!,
          );
        let tail = this.tails.get(known.tail);
        if (!tail) {
          if (this.tails.size >= 100_000) this.tails.clear();
          this.tails.set(known.tail, (tail = Buffer.from(known.tail)));
        }
        this.next();
        this.out.bytes((this.asFrom[from] ??= Buffer.from(`{"from":${JSON.stringify(p.names[from])},"to":`)));
        this.out.bytes((this.asTo[to] ??= Buffer.from(`${JSON.stringify(p.names[to])},`)));
        this.out.bytes(tail);
        return;
      }
    }
    const { from: f, to: t, proto: pr, port: n } = p.at(i);
    for (const r of simulateProbes(this.engine, this.services, f, t, pr, n, this.memo, this.reported)) {
      this.next();
      this.out.text(this.memo.json(r));
    }
  }

  /** The array's end (or the whole empty array), and everything still held. */
  end(): void {
    this.out.text(this.items ? '\n]\n' : '[\n]\n');
    this.out.flush();
  }
}
