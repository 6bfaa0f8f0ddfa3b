// Who this process is: written into the trace header and its first record.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ncclwatch {

struct ProcessInfo {
  int pid = 0;
  int ppid = 0;
  std::string host;
  int64_t start_wall_ns = 0;   // when the shim first saw this process (or its fork) call NCCL
  int64_t start_mono_ns = 0;
  std::string job_rank;        // RANK / SLURM_PROCID / OMPI_COMM_WORLD_RANK / PMI_RANK, if any

  // "key=value\0" pairs: host, pid, exe, cmdline, job ids and every NCCL_*/TORCH_NCCL_* variable.
  std::string as_strings() const;
};

const ProcessInfo& process_info();
// The same once collected, else nullptr; never waits (signal handlers).
const ProcessInfo* process_info_if_collected() noexcept;
// `host` fit for a file name in NCCLWATCH_DIR: letters, digits, '.', '_' and '-' kept, every other
// byte ('/' above all) as '_', at most 64 bytes, never "", "." or "..". Only file names: the trace
// keeps the real name.
std::string host_for_file_names(std::string_view host);
void process_info_after_fork_in_child() noexcept;

}  // namespace ncclwatch
