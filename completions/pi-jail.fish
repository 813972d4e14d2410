# fish completion for pi-jail(1): its options and subcommands.
function __pi_jail_no_command
    # True until the command (or a subcommand) has been typed.
    set -l words (commandline -opc)
    set -e words[1]
    set -l skip 0
    for w in $words
        if test $skip -eq 1
            set skip 0
            continue
        end
        switch $w
            case -w --workspace -p --profile --config --allow-read --allow-write --deny --allow-net --allow-ssh --allow-net-preset --memory --pids --cpus --publish --timeout --grace --report --net-log
                set skip 1
            case '-*'
            case '*'
                return 1
        end
    end
    return 0
end

complete -c pi-jail -f -n __pi_jail_no_command -a explain -d 'the effective policy; runs nothing'
complete -c pi-jail -f -n __pi_jail_no_command -a doctor -d 'can this host build a jail?'
complete -c pi-jail -f -n __pi_jail_no_command -a shell-init -d 'print the alias lines'
complete -c pi-jail -f -n __pi_jail_no_command -a help -d usage
complete -c pi-jail -f -n '__fish_seen_subcommand_from shell-init' -a 'bash zsh fish'

complete -c pi-jail -n __pi_jail_no_command -s w -l workspace -r -a '(__fish_complete_directories)' -d 'the read-write workspace'
complete -c pi-jail -n __pi_jail_no_command -s p -l profile -r -d 'base profile (pi, or a .toml file)'
complete -c pi-jail -n __pi_jail_no_command -l config -r -F -d 'operator policy file'
complete -c pi-jail -n __pi_jail_no_command -l no-project-config -d 'ignore <workspace>/.pi/jail.toml'
complete -c pi-jail -n __pi_jail_no_command -l allow-read -r -F -d 'also show PATH, read-only'
complete -c pi-jail -n __pi_jail_no_command -l allow-write -r -F -d 'also show PATH, read-write'
complete -c pi-jail -n __pi_jail_no_command -l deny -r -F -d 'hide PATH'
complete -c pi-jail -n __pi_jail_no_command -l allow-net -x -d 'a network rule, HOST[:PORT]'
complete -c pi-jail -n __pi_jail_no_command -l allow-ssh -x -d 'reach HOST[:PORT] over SSH (git, ssh)'
complete -c pi-jail -n __pi_jail_no_command -l publish -x -d 'serve a jail port on the host loopback, [127.0.0.1:]PORT[:JAILPORT]'
complete -c pi-jail -n __pi_jail_no_command -l allow-net-preset -x -a 'npm pypi crates github' -d 'the hosts of a package ecosystem'
complete -c pi-jail -n __pi_jail_no_command -l ephemeral-home -d '$HOME inside is discarded at the end'
complete -c pi-jail -n __pi_jail_no_command -l memory -x -d 'limit the memory of the jail to SIZE'
complete -c pi-jail -n __pi_jail_no_command -l pids -x -d 'at most N processes and threads'
complete -c pi-jail -n __pi_jail_no_command -l cpus -x -d 'at most N CPUs of time'
complete -c pi-jail -n __pi_jail_no_command -l timeout -x -d 'stop the jail after DURATION'
complete -c pi-jail -n __pi_jail_no_command -l grace -x -d 'time between TERM and KILL'
complete -c pi-jail -n __pi_jail_no_command -l report -r -F -d 'write a JSON report of the run'
complete -c pi-jail -n __pi_jail_no_command -l net-log -r -F -d 'append network decisions as JSON lines'
complete -c pi-jail -n __pi_jail_no_command -l unsandboxed -d 'run with NO isolation at all'
complete -c pi-jail -l json -d 'doctor and explain: print JSON'
complete -c pi-jail -n __pi_jail_no_command -s v -l verbose -d 'more detail'
complete -c pi-jail -n __pi_jail_no_command -s q -l quiet -d 'only errors'
complete -c pi-jail -n __pi_jail_no_command -s h -l help -d usage
complete -c pi-jail -n __pi_jail_no_command -l version -d 'version and backend'
