// The line protocol to native/bpfctl.c (libbpf): one long-lived helper process per datapath.
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

type Pending = {
  multi: 'none' | 'count' | 'until-ok';
  lines: string[];
  need: number;
  resolve: (l: string[]) => void;
  reject: (e: Error) => void;
};

const COMMAND = /^[\x21-\x7e]+(?: [\x21-\x7e]+)*$/;

export class Bpfctl {
  private readonly proc: ChildProcessWithoutNullStreams;
  private readonly queue: Pending[] = [];
  private closed = false;

  /** The helper's process id (tests pin it to one CPU: the flow cache is per CPU). */
  get pid(): number | undefined {
    return this.proc.pid;
  }

  constructor(binary: string) {
    this.proc = spawn(binary, [], { stdio: ['pipe', 'pipe', 'pipe'] });
    const rl = createInterface({ input: this.proc.stdout });
    rl.on('line', (line) => this.onLine(line));
    let stderr = '';
    this.proc.stderr.on('data', (d) => {
      stderr += String(d);
    });
    this.proc.on('exit', (code) => {
      this.closed = true;
      for (const p of this.queue.splice(0)) p.reject(new Error(`bpfctl exited (${code}): ${stderr.trim()}`));
    });
    this.proc.stdin.on('error', () => {});
  }

  private onLine(line: string): void {
    const p = this.queue[0];
    if (!p) return;
    p.lines.push(line);
    if (p.multi === 'none') {
      this.queue.shift();
      p.resolve(p.lines);
    } else if (p.multi === 'count') {
      if (p.lines.length === 1) {
        if (!line.startsWith('ok')) {
          this.queue.shift();
          p.resolve(p.lines);
          return;
        }
        p.need = Number(line.split(' ')[1]);
      }
      if (p.lines.length === p.need + 1) {
        this.queue.shift();
        p.resolve(p.lines);
      }
    } else if (line.startsWith('ok') || line.startsWith('err')) {
      this.queue.shift();
      p.resolve(p.lines);
    }
  }

  /**
   * Sends a command plus its payload (lines, or the raw records of writeb/eraseb); resolves with the
   * answer lines. Rejects on "err".
   */
  async send(
    command: string,
    payload: string[] | Buffer = [],
    multi: Pending['multi'] = 'none',
  ): Promise<string[]> {
    if (this.closed) throw new Error('bpfctl is not running');
    // One line of printable tokens: no value can smuggle a second command in (binary-safe protocol;
    // the only raw bytes are writeb/eraseb records, counted by the command).
    if (!COMMAND.test(command))
      throw new Error(`bpfctl: refusing a malformed command ${JSON.stringify(command.slice(0, 80))}`);
    if (!Buffer.isBuffer(payload) && payload.some((l) => !COMMAND.test(l)))
      throw new Error('bpfctl: refusing a malformed payload line');
    const answer = new Promise<string[]>((resolve, reject) =>
      this.queue.push({ multi, lines: [], need: 0, resolve, reject }),
    );
    if (Buffer.isBuffer(payload)) {
      this.proc.stdin.write(`${command}\n`);
      this.proc.stdin.write(payload);
    } else this.proc.stdin.write(payload.length ? `${command}\n${payload.join('\n')}\n` : `${command}\n`);
    const lines = await answer;
    const status = multi === 'until-ok' ? lines[lines.length - 1]! : lines[0]!;
    if (status.startsWith('err'))
      throw new Error(`bpfctl ${command.split(' ').slice(0, 2).join(' ')}: ${status.slice(4)}`);
    return lines;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.proc.stdin.end('quit\n');
    await new Promise((r) => this.proc.once('exit', r));
  }
}
