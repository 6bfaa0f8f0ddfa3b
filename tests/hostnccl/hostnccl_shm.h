// Shared-memory plumbing of the NCCL stand-in. Ranks of one communicator
// are processes (or threads) of one machine; every exchange is a set of
// named segments "hostnccl-<tag>-<what>-<rank>", one per rank, written once
// by their owner and read by peers. The last expected reader unlinks a name,
// so completed exchanges leave nothing behind.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hostnccl {

// Shared-memory name prefix of everything a communicator creates, with the
// leading '/'. Tags are fixed-width so no prefix matches another tag's.
std::string shm_prefix(uint64_t tag);

struct SegHeader {
  std::atomic<uint32_t> ready;    // set last by the owner
  std::atomic<uint32_t> readers;  // peers that mapped it so far
  uint32_t expected_readers;      // the one reaching this unlinks the name
  int32_t rank;
  uint64_t bytes;   // payload size
  int64_t aux[6];   // small per-exchange values (counts, colors, ...)
};

// A mapping of one segment. Move-only; unmaps on destruction.
class Segment {
 public:
  Segment() = default;
  Segment(Segment&& o) noexcept { *this = static_cast<Segment&&>(o); }
  Segment& operator=(Segment&& o) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  // Creates a fresh segment with room for `bytes` of payload. Failure to
  // create shared memory is fatal: tests cannot go on without it.
  static Segment create(const std::string& name, size_t bytes, uint32_t expected_readers);
  // Maps a segment its owner has published, counting this as one read;
  // empty if it does not exist or is not complete yet.
  static Segment open_published(const std::string& name);

  void publish();  // makes the segment visible to open_published
  explicit operator bool() const { return base_ != nullptr; }
  SegHeader& header() const { return *static_cast<SegHeader*>(base_); }
  unsigned char* payload() const { return static_cast<unsigned char*>(base_) + kPayloadOffset; }

 private:
  static constexpr size_t kPayloadOffset = 128;
  void reset();
  std::string name_;
  void* base_ = nullptr;
  size_t len_ = 0;
};

// Why a wait ended.
enum class Wait { Done, Aborted, Stalled };

// Polls ready() with a growing sleep until it returns true, *abort becomes
// true, or HOSTNCCL_STALL_TIMEOUT_SEC (if set) passes.
template <class F>
Wait wait_until(const std::atomic<bool>& abort, F&& ready);

// The stall timeout in ns, 0 for none.
int64_t stall_timeout_ns();
int64_t monotonic_ns();
void backoff_sleep(int round);

template <class F>
Wait wait_until(const std::atomic<bool>& abort, F&& ready) {
  const int64_t limit = stall_timeout_ns();
  const int64_t start = limit ? monotonic_ns() : 0;
  for (int round = 0;; ++round) {
    if (ready()) return Wait::Done;
    if (abort.load()) return Wait::Aborted;
    if (limit && monotonic_ns() - start > limit) return Wait::Stalled;
    backoff_sleep(round);
  }
}

// Publishes `mine` (named <base>-<me>) and maps the segments <base>-<r> of
// all n ranks into segs (segs[me] is `mine`). Ranks flagged in `excluded`
// do not take part; their entries stay empty.
Wait exchange(const std::string& base, int me, int n, Segment mine, std::vector<Segment>& segs,
              const std::atomic<bool>& abort, const std::vector<bool>* excluded = nullptr);

// Per-communicator counter of ranks that are done with it; the last one
// removes every segment left under the communicator's prefix.
class Ctl {
 public:
  explicit Ctl(uint64_t tag);
  Ctl(const Ctl&) = delete;
  Ctl& operator=(const Ctl&) = delete;
  ~Ctl();
  void detach(int nranks);  // once per rank

 private:
  uint64_t tag_;
  std::atomic<int>* count_ = nullptr;
};

// Unlinks every segment of the communicator (leftover sends nobody received,
// exchanges a peer never joined).
void remove_all(uint64_t tag);

}  // namespace hostnccl
