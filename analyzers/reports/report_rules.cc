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

      # Per rank: its mean GPU time in the collectives every rank of its communicator times alike, over
      # {rate_window}. A rank its peers wait for spends the least: their time includes the wait.
      - record: ncclwatch:rank_collective_gpu_seconds:mean
        expr: >-
          rate(ncclwatch_collective_gpu_seconds_total[{rate_window}])
          / rate(ncclwatch_collectives_timed_total[{rate_window}])
      # Per rank: how much longer than it the communicator's slowest rank spends per collective, which is
      # what its peers wait for it.
      - record: ncclwatch:rank_wait_caused_seconds
        expr: >-
          max by (job_id, comm) (ncclwatch:rank_collective_gpu_seconds:mean)
          - on (job_id, comm) group_right ncclwatch:rank_collective_gpu_seconds:mean

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

      # A rank that typically made its peers wait, over {straggler_after}, at least 1 ms and twice its own time
      # per collective (the reports' rule: `hang`'s stragglers), in at least 8 collectives. A communicator
      # whose ranks stopped (a hang: the alert above) is not judged: its waits are the hang's.
      - alert: NcclStraggler
        expr: >-
          quantile_over_time(0.5, ncclwatch:rank_wait_caused_seconds[{straggler_after}]) >= 0.001
          and quantile_over_time(0.5, ncclwatch:rank_wait_caused_seconds[{straggler_after}])
            >= 2 * quantile_over_time(0.5, ncclwatch:rank_collective_gpu_seconds:mean[{straggler_after}])
          and increase(ncclwatch_collectives_timed_total[{straggler_after}]) >= 8
          unless on (job_id, comm)
            (ncclwatch:comm_ops_issued:lag > 0 and changes(ncclwatch:comm_ops_issued:max[{hang_after}]) == 0)
        labels:
          severity: warning
        annotations:
          summary: "NCCL straggler: rank {{{{ $labels.rank }}}} of communicator {{{{ $labels.comm }}}} (job {{{{ $labels.job_id }}}}) on {{{{ $labels.instance }}}}"
          description: >-
            Its peers typically wait {{{{ $value | humanizeDuration }}}} for rank {{{{ $labels.rank }}}} at each
            collective of communicator {{{{ $labels.comm }}}}. Run `ncclwatch-report hang <trace folder>` on
            {{{{ $labels.instance }}}} for the collectives it started last and by how much.

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

      # A communicator rank that holds at least {idle_min_mib} MiB of GPU memory and ran no collective
      # and no send or receive for {idle_after}: memory the job could have back (one-sided ops, which
      # no counter counts, are not seen).
      - alert: NcclIdleCommunicatorMemory
        # (Its issued counter {idle_after} ago: the stretch is whole. Point-to-point counts where written.)
        expr: >-
          ncclwatch_communicator_gpu_memory_bytes >= {idle_min_bytes}
          and on (job_id, comm, rank) (ncclwatch_ops_issued_total offset {idle_after})
          unless on (job_id, comm, rank)
          (changes(ncclwatch_ops_issued_total[{idle_after}]) > 0 or changes(ncclwatch_p2p_ops_issued_total[{idle_after}]) > 0)
        labels:
          severity: warning
        annotations:
          summary: "Idle NCCL communicator holds {{{{ $value | humanize1024 }}}}B of GPU memory: rank {{{{ $labels.rank }}}} of {{{{ $labels.comm }}}} (job {{{{ $labels.job_id }}}}) on {{{{ $labels.instance }}}}"
          description: >-
            Rank {{{{ $labels.rank }}}} of communicator {{{{ $labels.comm }}}} ran no op for {idle_after} and still
            holds this memory. Destroy it when it is done with (ncclCommDestroy; PyTorch:
            destroy_process_group(group)), or on NCCL 2.29.7 and later release its memory meanwhile with
            ncclCommSuspend. Run `ncclwatch-report leaks <trace folder>` on {{{{ $labels.instance }}}} for the line
            that made it.
)rules";

// A Prometheus duration of whole seconds ("90s"); false when `seconds` is not one.
bool duration(double seconds, std::string& out) {
  if (!(seconds >= 1) || seconds > 31 * 24 * 3600 || std::floor(seconds) != seconds) return false;
  out = fmt::format("{}s", static_cast<long long>(seconds));
  return true;
}

}  // namespace

int run_rules(const RulesOptions& rules) {
  const RulesOptions defaults;
  struct Setting {
    const char* flag;
    double seconds, default_seconds;
    std::string duration;
  };
  Setting settings[] = {{"--hang-after", rules.hang_after_s, defaults.hang_after_s, {}},
                        {"--teardown-after", rules.teardown_after_s, defaults.teardown_after_s, {}},
                        {"--straggler-after", rules.straggler_after_s, defaults.straggler_after_s, {}},
                        {"--scrape-interval", rules.scrape_interval_s, defaults.scrape_interval_s, {}},
                        {"--idle-after", rules.idle_after_s, defaults.idle_after_s, {}}};
  std::string given;  // the settings that differ from the defaults, for the file's first line
  for (Setting& s : settings) {
    if (!duration(s.seconds, s.duration)) {
      say("rules: --hang-after, --teardown-after, --straggler-after, --scrape-interval and --idle-after take whole "
          "seconds, from 1 to 31 days");
      return 2;
    }
    if (s.seconds != s.default_seconds) given += fmt::format(" {} {}", s.flag, static_cast<long long>(s.seconds));
  }
  if (!(rules.idle_min_mib >= 0) || rules.idle_min_mib > double(1 << 30)) {
    say("rules: --idle-min-mib takes a number of MiB, from 0 to 2^30");
    return 2;
  }
  if (rules.idle_min_mib != defaults.idle_min_mib) given += fmt::format(" --idle-min-mib {}", rules.idle_min_mib);
  std::string rate_window;
  if (!duration(4 * rules.scrape_interval_s, rate_window)) {
    say("rules: --scrape-interval is at most a week (rates are taken over four scrapes)");
    return 2;
  }
  std::cout << fmt::format(kRules, fmt::arg("hang_after", settings[0].duration), fmt::arg("teardown_after", settings[1].duration),
                           fmt::arg("straggler_after", settings[2].duration), fmt::arg("rate_window", rate_window),
                           fmt::arg("idle_after", settings[4].duration), fmt::arg("idle_min_mib", rules.idle_min_mib),
                           fmt::arg("idle_min_bytes", static_cast<long long>(std::llround(rules.idle_min_mib * 1048576))),
                           fmt::arg("settings", given));
  return 0;
}

}  // namespace ncclwatch::report
