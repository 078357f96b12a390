// Shell completion generated from the commands: bash is checked by bash itself (syntax, and the
// completions it offers); zsh and fish scripts name every command.
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { run } from './run.ts';

const complete = (script: string, words: string[]) =>
  execFileSync(
    'bash',
    [
      '-c',
      `${script}\nCOMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _cascadectl; printf '%s\\n' "\${COMPREPLY[@]}"`,
    ],
    { encoding: 'utf8', cwd: '/' },
  )
    .split('\n')
    .filter(Boolean);

describe('cascadectl completion', () => {
  it("bash: valid, completes commands, subcommands and each command's flags", async () => {
    const { stdout, code } = await run('completion', 'bash');
    expect(code).toBe(0);
    execFileSync('bash', ['-n', '-c', stdout]);
    expect(complete(stdout, ['cascadectl', 'ne'])).toEqual(['netpol']);
    expect(complete(stdout, ['cascadectl', 'netpol', '']).sort()).toEqual([
      'explain',
      'exposure',
      'maps',
      'promote',
      'recommend',
      'simulate',
      'trace',
    ]);
    expect(complete(stdout, ['cascadectl', 'netpol', 'explain', '--po'])).toContain('--port');
    expect(complete(stdout, ['cascadectl', 'lint', '--st'])).toEqual(['--strict']);
    expect(complete(stdout, ['cascadectl', 'effective', '--kube'])).toEqual(['--kubeconfig']);
  });

  it('zsh and fish scripts cover every command; an unknown shell is a usage error', async () => {
    for (const shell of ['zsh', 'fish']) {
      const { stdout } = await run('completion', shell);
      for (const c of ['effective', 'status', 'explain', 'netpol', 'lint', 'diff', 'flows', 'get'])
        expect(stdout).toContain(c);
    }
    const bad = await run('completion', 'tcsh');
    expect(bad.code).toBe(2);
  });
});
