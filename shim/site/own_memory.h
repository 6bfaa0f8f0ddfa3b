// Copies memory of this process, failing instead of faulting where an address is not mapped: how
// the Python reader and the native-stack scan read structures that may be torn, freed or laid out
// other than we think.
//
// Through /proc/self/mem (open and pread, calls every sandbox allows). process_vm_readv only where
// that file cannot be opened and no seccomp filter is in place: container and sandbox policies may
// kill the process on it (SIGSYS), and a refused call must cost us the stack, never the process.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ncclwatch {

class OwnMemory {
 public:
  OwnMemory() noexcept;
  ~OwnMemory();
  OwnMemory(const OwnMemory&) = delete;
  OwnMemory& operator=(const OwnMemory&) = delete;

  // False where any of [from, from + bytes) is unreadable, or no way to read is open to us.
  bool read(void* to, uint64_t from, size_t bytes) noexcept;
  // False when neither way is open to this process (its memory cannot be read at all).
  bool usable() const noexcept { return how_ != How::kNone; }

 private:
  enum class How { kProcMem, kVmReadv, kNone };
  How how_ = How::kNone;
  int fd_ = -1;
};

// Whether a seccomp filter is in place for this thread (/proc/thread-self/status); true when that
// cannot be told.
bool seccomp_filter_in_place() noexcept;

}  // namespace ncclwatch
