#include "trace/trace_refs.h"

#include "comms/comms.h"
#include "process/process.h"
#include "trace/trace_writer.h"

#include <mutex>
#include <unordered_map>

namespace ncclwatch {
namespace {

using namespace trace;

struct Refs {
  std::mutex mutex;  // taken only to make a new index: rare
  uint32_t next_comm = 1;
  uint32_t next_stream = 1;
  std::unordered_map<uint64_t, uint32_t> untracked_comms;  // handle -> index
  std::unordered_map<uint64_t, uint16_t> streams;          // stream -> index
};

Refs& refs() {
  static Refs* r = new Refs();  // never destroyed: ops may be recorded during exit
  return *r;
}

// Index 0 stands in: the op is written, naming no communicator or stream.
void say_ref_failed() noexcept {
  notice_once(Notice::kTraceRefFailed,
              "ncclwatch: an internal error kept some ops from naming their communicator or stream in the trace; "
              "reports show those ops without them");
}

void write_comm_ref(uint32_t index, uint64_t comm_id, uint64_t handle, int32_t rank, int32_t nranks) noexcept {
  RecordSlot slot = reserve_record(sizeof(CommRefRecord));
  if (!slot) return;
  auto* rec = slot.as<CommRefRecord>();
  rec->time_ns = monotonic_ns();
  rec->comm_id = comm_id;
  rec->comm = handle;
  rec->index = index;
  rec->rank = rank;
  rec->nranks = nranks;
  slot.commit(RecordType::kCommRef);
}

}  // namespace

uint32_t make_comm_ref_index(CommTrack* track, uint64_t handle) noexcept {
  if (!track && handle == 0) return 0;
  Refs& r = refs();
  try {
    std::lock_guard lock(r.mutex);
    if (track) {
      if (uint32_t index = track->trace_index.load(std::memory_order_relaxed)) return index;
      uint32_t index = r.next_comm++;
      write_comm_ref(index, track->id, track->handle, track->rank, track->nranks);
      // Release: pairs with the acquire in comm_ref_index(); the record is written first.
      track->trace_index.store(index, std::memory_order_release);
      return index;
    }
    auto [it, made] = r.untracked_comms.try_emplace(handle, r.next_comm);
    if (made) {
      ++r.next_comm;
      write_comm_ref(it->second, 0, handle, -1, -1);
    }
    return it->second;
  } catch (...) {
    say_ref_failed();
    return 0;
  }
}

uint16_t make_stream_ref_index(uint64_t stream) noexcept {
  if (stream == 0) return 0;
  Refs& r = refs();
  uint32_t generation = g_refs_generation.load(std::memory_order_relaxed);
  uint16_t index = 0;
  try {
    std::lock_guard lock(r.mutex);
    if (auto it = r.streams.find(stream); it != r.streams.end()) {
      index = it->second;
    } else if (r.next_stream <= 0xffff) {
      index = static_cast<uint16_t>(r.next_stream++);
      r.streams.emplace(stream, index);
      RecordSlot slot = reserve_record(sizeof(StreamRefRecord));
      if (slot) {
        auto* rec = slot.as<StreamRefRecord>();
        rec->time_ns = monotonic_ns();
        rec->stream = stream;
        rec->index = index;
        slot.commit(RecordType::kStreamRef);
      }
    }
  } catch (...) {
    say_ref_failed();
    return 0;
  }
  t_thread.streams[stream_memo_slot(stream)] = {stream, generation, index};
  return index;
}

void write_thread_ref(uint64_t launch_prefix, uint32_t tid) noexcept {
  RecordSlot slot = reserve_record(sizeof(ThreadRefRecord));
  if (!slot) return;
  auto* rec = slot.as<ThreadRefRecord>();
  rec->time_ns = monotonic_ns();
  rec->launch_prefix = launch_prefix;
  rec->tid = tid;
  slot.commit(RecordType::kThreadRef);
}

void trace_refs_after_fork_in_child() noexcept {
  Refs& r = refs();
  new (&r.mutex) std::mutex();
  r.next_comm = 1;
  r.next_stream = 1;
  r.untracked_comms.clear();
  r.streams.clear();
  g_refs_generation.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace ncclwatch
