#include "model/kernel_spans.h"

#include "model/nccl_facts.h"

#include <algorithm>
#include <string>

namespace ncclwatch::model {

namespace {
// NCCL's proxy thread writes one op's channel records together, but ops of several communicators
// interleave: an op whose channels have not all come closes once this many others opened after it.
constexpr size_t kMaxOpenOps = 256;
// No collective's kernel runs an hour: a longer span is a damaged record or a wrapped timer.
constexpr uint64_t kMaxSpanNs = 3600ull * 1000 * 1000 * 1000;
}  // namespace

void KernelSpans::add(const trace::OpKernelRecord& k, const RecordView& r) {
  auto api = static_cast<trace::Api>(k.api);
  if (!(is_collective(api) || is_point_to_point(api))) return;
  if (!k.gpu_stop_ns || k.gpu_stop_ns < k.gpu_start_ns || k.gpu_stop_ns - k.gpu_start_ns > kMaxSpanNs) {
    implausible_.note("an op_kernel record's GPU times (start " + std::to_string(k.gpu_start_ns) + ", stop " +
                          std::to_string(k.gpu_stop_ns) + " ns) cannot be a kernel's: left out",
                      r);
    return;
  }
  int32_t nranks = implausible_.nranks(k.nranks, r);
  auto [it, inserted] = open_.try_emplace(OpKey{k.launch_id, k.seq, k.api, k.peer});
  Open& op = it->second;
  if (inserted) {
    op.row = {k.comm_id, bytes_of(api, k.count, k.datatype, nranks), nranks, k.api};
    op.channels_planned = k.nchannels;
    op.opened = arrivals_++;
  }
  op.first_start = std::min(op.first_start, k.gpu_start_ns);
  op.last_stop = std::max(op.last_stop, k.gpu_stop_ns);
  if (++op.channels_seen >= op.channels_planned) {
    close(it);
  } else if (open_.size() > kMaxOpenOps) {
    close(std::min_element(open_.begin(), open_.end(),
                           [](const auto& x, const auto& y) { return x.second.opened < y.second.opened; }));
  }
}

void KernelSpans::close(std::map<OpKey, Open>::iterator it) {
  out_[it->second.row].add(it->second.last_stop - it->second.first_start);
  open_.erase(it);
}

void KernelSpans::finish() {
  while (!open_.empty()) close(open_.begin());
}

}  // namespace ncclwatch::model
