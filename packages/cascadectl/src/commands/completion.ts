// cascadectl completion bash|zsh|fish: a completion script generated from the commands and their
// flags, so it never falls behind them. Install: `source <(cascadectl completion bash)`, or
// `cascadectl completion zsh > "${fpath[1]}/_cascadectl"`, or
// `cascadectl completion fish > ~/.config/fish/completions/cascadectl.fish`.
import type { Command } from '../cli.ts';
import { out, UsageError } from '../cli.ts';

const flagsOf = (c: Command) => [
  ...Object.entries(c.options).flatMap(([name, o]) => [`--${name}`, ...(o.short ? [`-${o.short}`] : [])]),
  '--help',
  '-h',
  '--kubeconfig',
  '--context',
];

export function completionScript(shell: string, commands: readonly Command[]): string {
  const top = [...new Set(commands.map((c) => c.name.split(' ')[0]!)), 'completion', '--version', '--help'];
  if (shell === 'bash')
    return `# bash completion for cascadectl (generated)
_cascadectl() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" cmd="\${COMP_WORDS[1]}" sub="\${COMP_WORDS[2]}"
  if [[ $COMP_CWORD -eq 1 ]]; then COMPREPLY=($(compgen -W "${top.join(' ')}" -- "$cur")); return; fi
  case "$cmd $sub" in
${commands
  .filter((c) => c.name.includes(' '))
  .map((c) => `    "${c.name}") COMPREPLY=($(compgen -W "${flagsOf(c).join(' ')}" -f -- "$cur")); return;;`)
  .join('\n')}
  esac
  case "$cmd" in
${[...new Set(commands.filter((c) => c.name.includes(' ')).map((c) => c.name.split(' ')[0]!))]
  .map(
    (g) =>
      `    ${g}) if [[ $COMP_CWORD -eq 2 ]]; then COMPREPLY=($(compgen -W "${commands
        .filter((c) => c.name.startsWith(`${g} `))
        .map((c) => c.name.split(' ')[1])
        .join(' ')}" -- "$cur")); return; fi;;`,
  )
  .join('\n')}
${commands
  .filter((c) => !c.name.includes(' '))
  .map((c) => `    ${c.name}) COMPREPLY=($(compgen -W "${flagsOf(c).join(' ')}" -f -- "$cur")); return;;`)
  .join('\n')}
    completion) COMPREPLY=($(compgen -W "bash zsh fish" -- "$cur")); return;;
  esac
  COMPREPLY=($(compgen -f -- "$cur"))
}
complete -F _cascadectl cascadectl
`;
  if (shell === 'zsh')
    return `#compdef cascadectl
# zsh completion for cascadectl (generated)
_cascadectl() {
  local -a cmds
  cmds=(${commands.map((c) => `'${c.name.split(' ')[0]}:${c.summary.replace(/'/g, '').replace(/:/g, ' ')}'`).join(' ')} 'completion:a completion script')
  if (( CURRENT == 2 )); then _describe 'command' cmds; return; fi
  case "$words[2] $words[3]" in
${commands
  .filter((c) => c.name.includes(' '))
  .map((c) => `    "${c.name}") compadd -- ${flagsOf(c).join(' ')}; _files; return;;`)
  .join('\n')}
  esac
  case "$words[2]" in
${commands
  .filter((c) => !c.name.includes(' '))
  .map((c) => `    ${c.name}) compadd -- ${flagsOf(c).join(' ')}; _files; return;;`)
  .join('\n')}
    completion) compadd bash zsh fish; return;;
  esac
  _files
}
compdef _cascadectl cascadectl
`;
  if (shell === 'fish')
    return `# fish completion for cascadectl (generated)
complete -c cascadectl -f -n '__fish_use_subcommand' -a '${top.join(' ')}'
${commands
  .map((c) => {
    const [first, second] = c.name.split(' ');
    const cond = second
      ? `__fish_seen_subcommand_from ${first}; and __fish_seen_subcommand_from ${second}`
      : `__fish_seen_subcommand_from ${first}`;
    const lines = Object.entries(c.options).map(
      ([name, o]) =>
        `complete -c cascadectl -n '${cond}' -l ${name}${o.short ? ` -s ${o.short}` : ''}${o.type === 'string' ? ' -r' : ''}`,
    );
    if (second)
      lines.unshift(
        `complete -c cascadectl -f -n '__fish_seen_subcommand_from ${first}' -a '${second}' -d '${c.summary.replace(/'/g, '')}'`,
      );
    return lines.join('\n');
  })
  .join('\n')}
complete -c cascadectl -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'
`;
  throw new UsageError(`completion: "${shell}" is not bash, zsh or fish`);
}

export function completionCommand(commands: () => readonly Command[]): Command {
  return {
    name: 'completion',
    summary: 'a shell completion script: cascadectl completion bash|zsh|fish',
    usage: 'cascadectl completion bash|zsh|fish',
    options: {},
    run(_values, positionals) {
      if (positionals.length !== 1) throw new UsageError('give one shell: bash, zsh or fish');
      out(completionScript(positionals[0]!, commands()));
      return 0;
    },
  };
}
