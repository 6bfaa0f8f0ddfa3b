// Appends records to this process's trace file through a shared file mapping: a committed record
// is in the file even if the process is killed a moment later (no user-space buffer to flush).
// The file is created at the first record, so a process that never calls NCCL leaves nothing.
#pragma once

#include <ncclwatch/trace_format.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace ncclwatch {

// Space for one record inside the mapping. Fill the body, then commit().
class RecordSlot {
 public:
  RecordSlot() = default;
  explicit RecordSlot(std::byte* at, uint32_t size) : at_(at), size_(size) {}
  explicit operator bool() const { return at_ != nullptr; }
  template <class T> T* as() const { return reinterpret_cast<T*>(at_); }
  std::byte* bytes() const { return at_; }
  uint32_t size() const { return size_; }
  // Publishes the record: readers trust it from now on.
  void commit(trace::RecordType type) const noexcept;

 private:
  std::byte* at_ = nullptr;
  uint32_t size_ = 0;
};

// Reserves `size` bytes (a multiple of 8, header included), zeroed. An empty slot means the
// record is lost (no file, disk full, size limit): it is counted and said once.
RecordSlot reserve_record(uint32_t size) noexcept;

// For the ring's chunks and the totals table: may use the share of NCCLWATCH_MAX_MB that ordinary
// records leave for them. Empty when it does not fit; the caller counts what it loses.
RecordSlot reserve_chunk_record(uint32_t size) noexcept;

// Counts one record lost (written nowhere) in the process's lost-record total.
void count_lost_record() noexcept;

// For the exit records: from the reserve every ordinary record leaves free, so it works when the
// trace is full. Async-signal-safe: no lock, no allocation; never opens the file. When the file
// was created but has no header yet, it is removed instead (unlink is its only system call).
RecordSlot reserve_exit_record(uint32_t size) noexcept;

// The bytes the trace may take: NCCLWATCH_MAX_MB, or less where RLIMIT_AS is finite (its address
// range counts against the limit). The same in every call, before the file opens too.
uint64_t trace_capacity_bytes() noexcept;

// Records dropped so far.
uint64_t lost_record_count() noexcept;

// The trace file's path, or "" if none was created. Allocation-free, for the signal path.
const char* trace_path_c() noexcept;

// A StringsRecord with the given "key=value\0..." blob.
void write_strings_record(trace::RecordType type, const std::string& blob) noexcept;
void write_notice_record(const char* text) noexcept;

// In a forked child: drop the parent's mapping without touching its file; the child gets its own.
void trace_writer_after_fork_in_child() noexcept;

}  // namespace ncclwatch
