// The native stack of another thread of this process, read without stopping it and without a
// signal (the application may own them all): /proc/self/task/<tid>/syscall gives the program
// counter and stack pointer of a thread blocked in a system call (a hung rank's thread waits in
// one: a futex, an ioctl to the GPU driver, a sleep), and the words above that stack pointer that
// point just after a call instruction in executable code are its return addresses. A scan, not an
// unwind: it can list a stale return address still on the stack, and it stops at 32 frames or
// 64 KiB. Memory is read with process_vm_readv, which fails instead of faulting, so a thread that
// exits meanwhile costs nothing but its stack.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace ncclwatch {

struct NativeStack {
  static constexpr int kMaxFrames = 32;
  uint64_t frames[kMaxFrames];  // innermost first: the program counter, then return addresses
  int nframes = 0;
  const char* unread = nullptr;  // why there are no frames ("the thread was running", ...)
};

// Reads thread `tid`'s stack. Bounded: a few reads of /proc and at most 64 KiB of stack; a thread
// found running (not in a system call) is looked at again for up to ~20 ms. Never throws.
NativeStack scan_native_stack(pid_t tid) noexcept;

// Whether the 7 bytes of code before an address end with a call instruction (x86-64: call rel32,
// or an indirect call through a register or memory; AArch64: BL or BLR in the last 4 bytes).
bool looks_like_return_address(const uint8_t (&before)[7]) noexcept;

}  // namespace ncclwatch
