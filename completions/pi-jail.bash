# bash completion for pi-jail(1): its options and subcommands; after the
# command's name, that command's own completion.
_pi_jail() {
  local cur prev words cword
  _init_completion || return

  local opts="--workspace -w --profile -p --config --no-project-config --allow-read --allow-write --deny
    --allow-net --allow-ssh --allow-net-preset --ephemeral-home --memory --pids --cpus --publish --timeout --grace --report --net-log --unsandboxed --json --verbose -v --quiet -q --help -h
    --version"
  local subcommands="explain doctor shell-init help"

  case $prev in
    -w | --workspace)
      _filedir -d
      return ;;
    --allow-read | --allow-write | --deny)
      _filedir
      return ;;
    -p | --profile)
      COMPREPLY=($(compgen -W "pi" -- "$cur"))
      _filedir toml
      return ;;
    --config | --report | --net-log)
      _filedir
      return ;;
    --allow-net | --memory | --pids | --cpus | --publish | --timeout | --grace)
      return ;;
    --allow-net-preset)
      COMPREPLY=($(compgen -W "npm pypi crates github" -- "$cur"))
      return ;;
    shell-init)
      COMPREPLY=($(compgen -W "bash zsh fish" -- "$cur"))
      return ;;
  esac

  # Where the command starts (after --, or the first word that is neither
  # an option, an option's value nor a subcommand), complete that command.
  local i sub=
  for ((i = 1; i < cword; i++)); do
    case ${words[i]} in
      --) _command_offset $((i + 1)); return ;;
      -w | --workspace | -p | --profile | --config | --allow-read | --allow-write | --deny | --allow-net | --allow-ssh | --allow-net-preset | \
        --memory | --pids | --cpus | --publish | --timeout | --grace | --report | --net-log) ((i++)) ;;
      -*) ;;
      explain | doctor | shell-init | help) [[ -z $sub ]] && sub=${words[i]} ;;
      *) [[ -z $sub ]] && { _command_offset "$i"; return; } ;;
    esac
  done

  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  elif [[ -z $sub ]]; then
    COMPREPLY=($(compgen -W "$subcommands" -- "$cur") $(compgen -c -- "$cur"))
  fi
}
complete -F _pi_jail pi-jail
