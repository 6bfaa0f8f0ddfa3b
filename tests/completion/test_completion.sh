#!/usr/bin/env bash
# The bash completion (scripts/completion/ncclwatch.bash) offers what the tools' --help say:
#   test_completion.sh NCCLWATCH_REPORT LAUNCHER
set -uo pipefail
source "$(dirname "$0")/../../scripts/completion/ncclwatch.bash"
report=$(readlink -f "$1") launcher=$(readlink -f "$2") failed=0
expect() {  # expect FUNCTION "WANTED WORDS" WORD...
  local fn=$1 want=$2; shift 2
  COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()
  "$fn"
  local got; got="$(printf '%s\n' "${COMPREPLY[@]}" | grep -v / | sort | xargs)"
  if [ "$got" = "$want" ]; then echo "ok: ${*:2} -> $got"; else echo "FAIL: ${*:2} -> '$got', wanted '$want'"; failed=1; fi
}
cd "$(mktemp -d)"  # no files here to complete
expect _ncclwatch_report "timeline" "$report" ti
expect _ncclwatch_report "hang html" "$report" h
expect _ncclwatch_report "--ranks" "$report" timeline --r
expect _ncclwatch_report "--format" "$report" --fo
expect _ncclwatch_report "--no-symbols" "$report" leaks --no
# Only what each subcommand accepts (the help's notes name --format and --csv of others).
expect _ncclwatch_report "" "$report" timeline --fo
expect _ncclwatch_report "" "$report" metrics --cs
# An option's values, not file names.
expect _ncclwatch_report "csv" "$report" hang --format c
expect _ncclwatch_report "csv json text" "$report" latency --format ""
expect _ncclwatch_report "" "$report" timeline --ranks ""
expect _ncclwatch_launcher "run" "$launcher" r
expect _ncclwatch_launcher "fail" "$launcher" run --on-leak f
expect _ncclwatch_launcher "--dir" "$launcher" run --d
expect _ncclwatch_report "--job" "$report" export --j
expect _ncclwatch_launcher "sql" "$launcher" s
expect _ncclwatch_launcher "late_hosts late_ranks" "$launcher" sql export --query late
exit $failed
