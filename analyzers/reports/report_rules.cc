// `ncclwatch-report rules`: Prometheus recording and alerting rules over the series ncclwatch
// writes (metrics_text.h: the shim's live files and `ncclwatch-report metrics`, the same names and
// labels), for users to load as they are. The durations are settings, written into the rules.
#include "reports/commands.h"

#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <string>

namespace ncclwatch::report {
namespace {

// {hang_after}, {teardown_after}: Prometheus durations. Go's template braces are doubled ({{{{ }}}})
// for fmt.
constexpr const char* kRules = R"rules(# ncclwatch's Prometheus rules: `ncclwatch-report rules{settings}` wrote them.
# Load them as they are (rule_files:), over the series of the shim's live metrics files
# (NCCLWATCH_METRICS_FILE, read by node-exporter's textfile collector) or of `ncclwatch-report metrics`.
groups:
  - name: ncclwatch
    rules:
      # Per communicator: the most collectives any of its ranks issued, and the spread between its ranks.
      - record: ncclwatch:comm_ops_issued:max
        expr: max by (job_id, comm) (ncclwatch_ops_issued_total)
      - record: ncclwatch:comm_ops_issued:lag
        expr: max by (job_id, comm) (ncclwatch_ops_issued_total) - min by (job_id, comm) (ncclwatch_ops_issued_total)
      # Per rank: how many collectives it is behind the communicator's furthest rank.
      - record: ncclwatch:rank_ops_behind
        expr: ncclwatch:comm_ops_issued:max - on (job_id, comm) group_right ncclwatch_ops_issued_total

      # A rank behind its peers that issued nothing for {hang_after}: the one the others wait for.
      - alert: NcclHangSuspected
        expr: ncclwatch:rank_ops_behind > 0 and changes(ncclwatch_ops_issued_total[{hang_after}]) == 0
        for: {hang_after}
        labels:
          severity: critical
        annotations:
          summary: "NCCL hang suspected: rank {{{{ $labels.rank }}}} of communicator {{{{ $labels.comm }}}} (job {{{{ $labels.job_id }}}}) on {{{{ $labels.instance }}}}"
          description: >-
            Rank {{{{ $labels.rank }}}} of communicator {{{{ $labels.comm }}}} is {{{{ $value }}}} collective(s) behind
            its peers with no progress for {hang_after}. Run `ncclwatch-report hang <trace folder>` on
            {{{{ $labels.instance }}}} to see which op each rank is in and why.

      # A communicator with a rank whose stream the shim's watchdog found stalled (NCCLWATCH_STALL_SEC),
      # for {hang_after} more: one alert per communicator, however many of its ranks wait.
      - alert: NcclCommunicatorStalled
        expr: max by (job_id, comm) (ncclwatch_stalled) == 1
        for: {hang_after}
        labels:
          severity: warning
        annotations:
          summary: "NCCL communicator {{{{ $labels.comm }}}} stalled (job {{{{ $labels.job_id }}}})"
          description: >-
            A rank's collective on communicator {{{{ $labels.comm }}}} has not completed for NCCLWATCH_STALL_SEC and
            {hang_after} more. Run `ncclwatch-report hang <trace folder>` to see which rank the others wait for.

      # Communicators never destroyed, at the end of a process (or of a finished job's report).
      - alert: NcclCommunicatorsLeaked
        expr: ncclwatch_communicators{{state=~"leaked|released_at_exit"}} > 0
        labels:
          severity: warning
        annotations:
          summary: "{{{{ $value }}}} NCCL communicator rank(s) never destroyed (job {{{{ $labels.job_id }}}}) on {{{{ $labels.instance }}}}"
          description: >-
            Run `ncclwatch-report leaks <trace folder>` on {{{{ $labels.instance }}}} for the line that made each
            and the remedy.

      # A teardown call (finalize, destroy, abort) inside for {teardown_after} while the process runs, or
      # one its process ended inside of.
      - alert: NcclTeardownHung
        expr: >-
          ncclwatch_communicators{{state=~"finalize_hung|destroy_hung|abort_hung"}} > 0
          or (ncclwatch_communicators{{state=~"finalizing|destroying|aborting"}} > 0)
        for: {teardown_after}
        labels:
          severity: critical
        annotations:
          summary: "NCCL teardown hung: {{{{ $value }}}} communicator rank(s) in state {{{{ $labels.state }}}} (job {{{{ $labels.job_id }}}}) on {{{{ $labels.instance }}}}"
          description: >-
            A finalize, destroy or abort did not return. Run `ncclwatch-report leaks <trace folder>` on
            {{{{ $labels.instance }}}}: it names the call and how long it was inside.
)rules";

// A Prometheus duration of whole seconds ("90s"); false when `seconds` is not one.
bool duration(double seconds, std::string& out) {
  if (!(seconds >= 1) || seconds > 31 * 24 * 3600 || std::floor(seconds) != seconds) return false;
  out = fmt::format("{}s", static_cast<long long>(seconds));
  return true;
}

}  // namespace

int run_rules(const RulesOptions& rules) {
  std::string hang_after, teardown_after;
  if (!duration(rules.hang_after_s, hang_after) || !duration(rules.teardown_after_s, teardown_after)) {
    say("rules: --hang-after and --teardown-after take whole seconds, from 1 to 31 days");
    return 2;
  }
  std::string settings;
  if (rules.hang_after_s != RulesOptions{}.hang_after_s) settings += " --hang-after " + hang_after.substr(0, hang_after.size() - 1);
  if (rules.teardown_after_s != RulesOptions{}.teardown_after_s)
    settings += " --teardown-after " + teardown_after.substr(0, teardown_after.size() - 1);
  std::cout << fmt::format(kRules, fmt::arg("hang_after", hang_after), fmt::arg("teardown_after", teardown_after),
                           fmt::arg("settings", settings));
  return 0;
}

}  // namespace ncclwatch::report
