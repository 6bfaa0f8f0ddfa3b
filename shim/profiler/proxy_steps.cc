// NCCL's proxy operations and their steps, as OpProxy records (proxy_steps.h).
#include "profiler/proxy_steps.h"

#include "process/process.h"
#include "trace/trace.h"

#include <cstdint>
#include <new>

namespace ncclwatch {
namespace {

namespace abi = profiler_abi;
using profiler_slots::SlotKind;

// Where the time a step spent in `state` (until its next one) goes.
enum class Wait { kOther, kGpu, kPeer };

Wait wait_of(int state) noexcept {
  switch (state) {
    case abi::kProxyStepSendGPUWait:
    case abi::kProxyStepRecvGPUWait: return Wait::kGpu;
    case abi::kProxyStepSendPeerWait:
    case abi::kProxyStepSendWait:
    case abi::kProxyStepRecvWait: return Wait::kPeer;
    default: return Wait::kOther;  // posted, flushing
  }
}

// The step's time in its latest state, up to `now`, to its operation's sums.
void close_state(ProxyStepSlot& s, int64_t now) noexcept {
  int64_t spent = now - s.mark_ns;
  if (spent <= 0) return;
  switch (wait_of(s.state)) {
    case Wait::kGpu: s.op->gpu_wait_ns += uint64_t(spent); break;
    case Wait::kPeer: s.op->peer_wait_ns += uint64_t(spent); break;
    case Wait::kOther: break;
  }
}

void write_proxy_op(const ProxyOpSlot& p, int64_t stop_ns) noexcept {
  RecordSlot slot = reserve_record(sizeof(trace::OpProxyRecord));
  if (!slot) return;
  auto* r = slot.as<trace::OpProxyRecord>();
  profiler_slots::stamp_op(*r, p.op);
  r->start_ns = p.start_ns;
  r->stop_ns = stop_ns;
  r->bytes = p.bytes;
  r->gpu_wait_ns = p.gpu_wait_ns;
  r->peer_wait_ns = p.peer_wait_ns;
  r->step_ns = p.step_ns;
  r->remote = p.remote;
  r->channel = p.channel;
  r->steps_planned = p.steps_planned;
  r->steps_done = p.steps_done;
  r->chunk_bytes = p.chunk_bytes;
  r->flags = p.flags | (p.send ? trace::kProxySend : 0);
  if (p.moving_ns >= p.start_ns && p.moving_ns - p.start_ns < int64_t{UINT32_MAX} * 1000) {
    r->moving_after_us = uint32_t((p.moving_ns - p.start_ns) / 1000);
    r->flags |= trace::kProxyMoving;
  }
  slot.commit(trace::RecordType::kOpProxy);
}

// An operation whose slot comes round again while open, or that NCCL stops: its record.
void close_op(ProxyOpSlot& p, bool write) noexcept {
  if (!p.open) return;
  p.open = false;
  if (write) write_proxy_op(p, monotonic_ns());
}

}  // namespace

ProxyOps::~ProxyOps() { delete[] slots_; }

bool ProxyOps::create() noexcept {
  if (!slots_) slots_ = new (std::nothrow) ProxyOpSlot[kCapacity];
  return slots_ != nullptr;
}

void* ProxyOps::start_op(const profiler_slots::ApiSlot& op, const abi::ProxyOpDescr& d) noexcept {
  if (!slots_) return nullptr;
  ProxyOpSlot& p = slots_[next_++ % kCapacity];
  close_op(p, true);
  p = ProxyOpSlot{};
  p.open = true;
  p.op = op;
  p.send = d.isSend != 0;
  p.channel = d.channelId;
  p.remote = d.peer;
  p.steps_planned = d.nSteps > 0 ? uint32_t(d.nSteps) : 0;
  p.chunk_bytes = d.chunkSize > 0 ? uint32_t(d.chunkSize) : 0;
  p.start_ns = monotonic_ns();
  return &p;
}

void* ProxyOps::start_step(void* parent, int step) noexcept {
  ProxyOpSlot* p = profiler_slots::element_at(slots_, kCapacity, parent);
  if (!p || !p->open || step < 0) return nullptr;
  ProxyStepSlot& s = p->steps[uint32_t(step) % ProxyOpSlot::kSteps];
  // NCCL keeps at most kSteps of an operation in flight: a slot still open lost its stop.
  if (s.open) p->flags |= trace::kProxyStepsLost;
  s.open = true;
  s.op = p;
  s.state = 0;
  s.start_ns = s.mark_ns = monotonic_ns();
  return &s;
}

void stop_proxy_event(void* handle, bool write) noexcept {
  auto kind = *static_cast<const SlotKind*>(handle);
  if (kind == SlotKind::kProxyOp) return close_op(*static_cast<ProxyOpSlot*>(handle), write);
  auto& s = *static_cast<ProxyStepSlot*>(handle);
  if (!s.open || !s.op->open) return;
  int64_t now = monotonic_ns();
  close_state(s, now);
  s.op->step_ns += uint64_t(now - s.start_ns);
  ++s.op->steps_done;
  s.open = false;
}

void record_proxy_step_state(void* handle, int state, const abi::EventStateArgs* args) noexcept {
  auto& s = *static_cast<ProxyStepSlot*>(handle);
  if (!s.open || !s.op->open) return;
  int64_t now = monotonic_ns();
  close_state(s, now);
  s.state = state;
  s.mark_ns = now;
  // The step's size as it went out or came in (NCCL's transSize is the latest transfer's otherwise).
  constexpr uint64_t kMaxStepBytes = uint64_t{1} << 32;
  // A send's data begins to move when its first step's is ready for the network (NCCL then waits
  // for the peer's buffer, SendPeerWait, and posts it, SendWait).
  bool to_network = state == abi::kProxyStepSendPeerWait || state == abi::kProxyStepSendWait;
  if (to_network && s.op->moving_ns == 0) s.op->moving_ns = now;
  bool sized = state == abi::kProxyStepSendWait || state == abi::kProxyStepRecvFlushWait;
  if (sized && args && args->proxyStep.transSize < kMaxStepBytes) s.op->bytes += args->proxyStep.transSize;
}

}  // namespace ncclwatch
