// The shim's scan of another thread's native stack (site/native_stack.h): which code bytes end in
// a call, and a scan of a real thread blocked in a system call.
#include "site/native_stack.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

namespace {

using ncclwatch::looks_like_return_address;

// The 7 bytes before an address whose last bytes are `tail` (padded in front with 0x90, a nop).
bool ends_in_call(std::initializer_list<uint8_t> tail) {
  uint8_t before[7];
  std::memset(before, 0x90, sizeof(before));
  std::copy(tail.begin(), tail.end(), before + 7 - tail.size());
  return looks_like_return_address(before);
}

std::atomic<pid_t> g_waiting_tid{0};

__attribute__((noinline)) void wait_in_a_system_call() {
  g_waiting_tid = gettid();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
}

}  // namespace

#if defined(__x86_64__)
TEST_CASE("x86-64 call instructions are told from other code") {
  CHECK(ends_in_call({0xe8, 0x10, 0x20, 0x30, 0x40}));        // call rel32
  CHECK(ends_in_call({0xff, 0xd0}));                          // call rax
  CHECK(ends_in_call({0x41, 0xff, 0xd3}));                    // call r11
  CHECK(ends_in_call({0xff, 0x10}));                          // call [rax]
  CHECK(ends_in_call({0xff, 0x50, 0x08}));                    // call [rax+8]
  CHECK(ends_in_call({0xff, 0x14, 0x24}));                    // call [rsp]
  CHECK(ends_in_call({0xff, 0x54, 0x24, 0x08}));              // call [rsp+8]
  CHECK(ends_in_call({0xff, 0x15, 0x00, 0x10, 0x00, 0x00}));  // call [rip+0x1000]
  CHECK(ends_in_call({0xff, 0x90, 0x00, 0x01, 0x00, 0x00}));  // call [rax+0x100]
  CHECK(ends_in_call({0xff, 0x94, 0x24, 0x00, 0x01, 0x00, 0x00}));  // call [rsp+0x100]
  CHECK_FALSE(ends_in_call({0xe9, 0x10, 0x20, 0x30, 0x40}));  // jmp rel32
  CHECK_FALSE(ends_in_call({0xff, 0xe0}));                    // jmp rax
  CHECK_FALSE(ends_in_call({0x48, 0x89, 0xc7}));              // mov rdi, rax
  CHECK_FALSE(ends_in_call({0x90, 0x90}));                    // nops
}
#endif

TEST_CASE("a thread blocked in a system call: its stack holds the function that made it wait") {
  std::thread sleeper([] { wait_in_a_system_call(); });
  while (!g_waiting_tid) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // into its sleep
  pid_t tid = g_waiting_tid;
  REQUIRE(tid != 0);
  ncclwatch::NativeStack stack = ncclwatch::scan_native_stack(tid);
  sleeper.join();
  INFO(stack.unread);
  REQUIRE(stack.nframes >= 2);
  bool found = false;
  auto wanted = reinterpret_cast<uint64_t>(&wait_in_a_system_call);
  for (int i = 1; i < stack.nframes; ++i)
    found |= stack.frames[i] > wanted && stack.frames[i] < wanted + 4096;  // a return address inside it (sanitizers make it long)
  CHECK(found);
}

TEST_CASE("a thread that is gone is said so, without frames") {
  ncclwatch::NativeStack stack = ncclwatch::scan_native_stack(1 << 29);
  CHECK(stack.nframes == 0);
  CHECK(stack.unread != nullptr);
}
