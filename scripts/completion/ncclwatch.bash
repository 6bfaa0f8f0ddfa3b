# Bash completion for ncclwatch-report and ncclwatch, read from their own --help texts (the one
# source of their commands and options): source this file, or install it where bash-completion
# looks (meson install puts it in share/bash-completion/completions).

# Words of a --help text: the subcommands (the "Subcommands:" block) or the options (--long and -s
# forms of the "Options:" block only: the notes below it name options of other subcommands).
_ncclwatch_help_words() {
  local kind=$1; shift
  "$@" --help 2>/dev/null | awk -v kind="$kind" '
    /^Subcommands:/ { block = "sub"; next }
    /^Options:/ { block = "opt"; next }
    /^[^ ]/ { block = "" }
    kind == "sub" && block == "sub" && $1 ~ /^[a-z]/ { print $1 }
    kind == "opt" && block == "opt" { for (i = 1; i <= NF; i++) if ($i ~ /^-/) { n = split($i, forms, ","); for (k = 1; k <= n; k++) {
                      w = forms[k]; sub(/[^-a-z0-9].*$/, "", w); if (w ~ /^--?[a-z]/) print w } } }' | sort -u
}

_ncclwatch_report() {
  local cur=${COMP_WORDS[COMP_CWORD]} tool=${COMP_WORDS[0]} sub="" i
  for ((i = 1; i < COMP_CWORD; i++)); do
    case ${COMP_WORDS[i]} in -*) ;; *) if _ncclwatch_help_words sub "$tool" | grep -qx -- "${COMP_WORDS[i]}"; then sub=${COMP_WORDS[i]}; break; fi ;; esac
  done
  if [ "$sub" = "sql" ]; then _ncclwatch_sql; return; fi
  # An option's value: --format's three, a file after -o and --metrics-file, nothing to offer after
  # the others that take one (numbers, ranks, a communicator).
  case ${COMP_WORDS[COMP_CWORD-1]} in
    --format) COMPREPLY=($(compgen -W "text json csv" -- "$cur")); return ;;
    -o|--output|--metrics-file) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --ranks|--comm|--from|--to|--interval|--pid|--lag|--hang-after|--teardown-after|--straggler-after|--scrape-interval|--idle-after|--idle-min-mib) COMPREPLY=(); return ;;
  esac
  if [[ $cur == -* ]]; then
    if [ -n "$sub" ]; then COMPREPLY=($(compgen -W "$(_ncclwatch_help_words opt "$tool" "$sub")" -- "$cur"))
    else COMPREPLY=($(compgen -W "$(_ncclwatch_help_words opt "$tool")" -- "$cur")); fi
  elif [ -z "$sub" ]; then
    COMPREPLY=($(compgen -W "$(_ncclwatch_help_words sub "$tool")" -- "$cur") $(compgen -f -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}

# sql EXPORT (of either command): folders, the named questions after --query.
_ncclwatch_sql() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  case $prev in
    --query) COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" sql --list 2>/dev/null | cut -d' ' -f1)" -- "$cur")) ;;
    *) COMPREPLY=($(compgen -d -W "--query --list --csv" -- "$cur")) ;;
  esac
}

# ncclwatch run [--dir DIR] [--on-leak MODE] -- CMD: after "--", the command's own completion;
# ncclwatch export and sql: as ncclwatch-report's.
_ncclwatch_launcher() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} i
  for ((i = 1; i < COMP_CWORD; i++)); do
    if [ "${COMP_WORDS[i]}" = "--" ]; then COMPREPLY=($(compgen -c -- "$cur")); return; fi
  done
  if [ "${COMP_WORDS[1]}" = "sql" ] && [ "$COMP_CWORD" -gt 1 ]; then _ncclwatch_sql; return; fi
  if [ "${COMP_WORDS[1]}" = "export" ] && [ "$COMP_CWORD" -gt 1 ]; then
    case $prev in
      -o|--output) COMPREPLY=($(compgen -d -- "$cur")) ;;
      *) COMPREPLY=($(compgen -f -W "-o --output --job --no-symbols --all" -- "$cur")) ;;
    esac
    return
  fi
  case $prev in
    --dir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
    --on-leak) COMPREPLY=($(compgen -W "warn fail off" -- "$cur")); return ;;
  esac
  if [ "$COMP_CWORD" -eq 1 ]; then COMPREPLY=($(compgen -W "run export sql --version --help" -- "$cur")); return; fi
  COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" --help 2>/dev/null | grep -o -- '--[a-z-]*' | sort -u) --" -- "$cur"))
}

complete -F _ncclwatch_report ncclwatch-report
complete -F _ncclwatch_launcher ncclwatch
