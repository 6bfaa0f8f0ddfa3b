#include "site/native_stack.h"

#include "site/own_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace ncclwatch {
namespace {

constexpr size_t kMaxStackBytes = 64 * 1024;

struct Range {
  uint64_t begin = 0, end = 0;
};

// A whole small /proc file (they are generated on read: one read of a large buffer).
bool read_proc_file(const char* path, std::vector<char>& out, size_t limit) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out.assign(limit, 0);
  size_t used = 0;
  while (used + 1 < limit) {
    ssize_t n = read(fd, out.data() + used, limit - 1 - used);
    if (n <= 0) break;
    used += static_cast<size_t>(n);
  }
  close(fd);
  out.resize(used);
  out.push_back('\0');
  return used > 0;
}

// The thread's stack pointer and program counter while it is blocked ("running": it is not).
enum class Where { kBlocked, kRunning, kGone };
Where stack_and_pc(pid_t tid, uint64_t& sp, uint64_t& pc) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", static_cast<int>(tid));
  std::vector<char> text;
  if (!read_proc_file(path, text, 512)) return Where::kGone;
  if (std::strncmp(text.data(), "running", 7) == 0) return Where::kRunning;
  // "nr arg1 .. arg6 sp pc" in a system call, "-1 sp pc" blocked outside one: the last two fields.
  std::vector<uint64_t> fields;
  for (char* p = text.data(); *p;) {
    char* end = nullptr;
    uint64_t value = std::strtoull(p, &end, 0);
    if (end == p) break;
    fields.push_back(value);
    p = end;
    while (*p == ' ' || *p == '\n') ++p;
  }
  if (fields.size() < 3) return Where::kGone;
  sp = fields[fields.size() - 2];
  pc = fields.back();
  return Where::kBlocked;
}

// Executable mappings, and the mapping that holds `sp` (where the scan must stop).
void read_maps(uint64_t sp, std::vector<Range>& code, Range& stack) {
  std::vector<char> text;
  if (!read_proc_file("/proc/self/maps", text, 4 << 20)) return;
  for (char* line = text.data(); *line;) {
    char* next = std::strchr(line, '\n');
    if (next) *next = '\0';
    unsigned long long begin = 0, end = 0;
    char perms[8] = {};
    if (std::sscanf(line, "%llx-%llx %7s", &begin, &end, perms) == 3) {
      if (perms[2] == 'x') code.push_back({begin, end});
      if (sp >= begin && sp < end) stack = {begin, end};
    }
    if (!next) break;
    line = next + 1;
  }
}

bool in_code(const std::vector<Range>& code, uint64_t address) {
  return std::any_of(code.begin(), code.end(), [&](const Range& r) { return address >= r.begin && address < r.end; });
}

}  // namespace

bool looks_like_return_address(const uint8_t (&b)[7]) noexcept {
#if defined(__aarch64__)
  uint32_t insn = 0;
  std::memcpy(&insn, b + 3, 4);
  return (insn & 0xfc000000u) == 0x94000000u || (insn & 0xfffffc1fu) == 0xd63f0000u;  // BL, BLR
#else
  // b[6] is the byte just before the address. An indirect call is FF /2 (ModRM reg field 2).
  auto indirect = [&](int at, int mod, bool sib, bool rip_relative) {
    uint8_t modrm = b[at + 1];
    if (b[at] != 0xff || ((modrm >> 3) & 7) != 2 || (modrm >> 6) != mod) return false;
    int rm = modrm & 7;
    if (sib) return rm == 4;
    return rip_relative ? rm == 5 : rm != 4 && (mod != 0 || rm != 5);
  };
  return b[2] == 0xe8                                          // call rel32
         || indirect(5, 3, false, false) || indirect(5, 0, false, false)  // call reg, call [reg]
         || indirect(4, 1, false, false) || indirect(4, 0, true, false)   // [reg+d8], [sib]
         || indirect(3, 1, true, false)                                   // [sib+d8]
         || indirect(1, 2, false, false) || indirect(1, 0, false, true)   // [reg+d32], [rip+d32]
         || indirect(0, 2, true, false);                                  // [sib+d32]
#endif
}

NativeStack scan_native_stack(pid_t tid) noexcept {
  NativeStack out;
  try {
    uint64_t sp = 0, pc = 0;
    Where where = Where::kRunning;
    for (int attempt = 0; attempt < 10; ++attempt) {
      where = stack_and_pc(tid, sp, pc);
      if (where != Where::kRunning) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (where == Where::kRunning) {
      out.unread = "the thread was running (not blocked in a system call) each time it was looked at";
      return out;
    }
    if (where == Where::kGone || sp == 0) {
      out.unread = "the thread's state could not be read (it may have exited)";
      return out;
    }
    std::vector<Range> code;
    Range stack;
    read_maps(sp, code, stack);
    out.frames[out.nframes++] = pc;
    if (stack.end <= sp) return out;
    size_t bytes = std::min<uint64_t>(stack.end - sp, kMaxStackBytes) & ~uint64_t{7};
    std::vector<uint64_t> words(bytes / 8);
    // The thread may run on meanwhile: what is read is a snapshot, possibly torn; the call checks
    // below keep what could not be a return address out.
    OwnMemory memory;
    if (!memory.usable()) {
      out.unread = "this process cannot read its own memory (/proc/self/mem refused, process_vm_readv unsafe)";
      return out;
    }
    if (!memory.read(words.data(), sp & ~uint64_t{7}, bytes)) return out;
    for (uint64_t word : words) {
      if (out.nframes == NativeStack::kMaxFrames) break;
      if (word < 7 || !in_code(code, word) || word == out.frames[out.nframes - 1]) continue;
      uint8_t before[7];
      if (memory.read(before, word - 7, sizeof(before)) && looks_like_return_address(before))
        out.frames[out.nframes++] = word;
    }
  } catch (...) {
    out.unread = "an internal error while reading it";
  }
  return out;
}

}  // namespace ncclwatch
