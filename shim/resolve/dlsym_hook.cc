// The shim's dlsym. Programs that reach NCCL through dlopen + dlsym(handle, "ncclX") (Python's
// ctypes, vLLM's and SGLang's pynccl, XLA's CUDA plugin, NVSHMEM) never call our exported ncclX;
// for them dlsym hands out a wrapper bound to the very library it found (bound_wrappers.h).
// Every other lookup goes to the C library's dlsym untouched.
//
// Why assembly: glibc's dlsym reads its caller's return address to resolve RTLD_NEXT (and to tie
// the looked-up object to the caller). A C++ wrapper calling it would make every lookup look as
// if it came from the shim, breaking other preloads that use RTLD_NEXT. So dlsym is a stub that
// asks ncclwatch_route_dlsym what to do, then either returns its answer or jumps to the C
// library's dlsym with the caller's own return address still on the stack.
#include "process/process.h"
#include "resolve/bound_wrappers.h"
#include "resolve/cuda_entry_points.h"
#include "resolve/resolver.h"

#include <dlfcn.h>

namespace ncclwatch {
namespace {

// Spelled out, not strncmp: a sanitizer runtime's strncmp is not ready when it first calls dlsym.
NCCLWATCH_UNINSTRUMENTED bool names_nccl(const char* name) {
  return name && name[0] == 'n' && name[1] == 'c' && name[2] == 'c' && name[3] == 'l';
}

// Whether `name` may be one of the interposed CUDA entry points (cuGraph*, cuStream*, cuGetProcAddress*).
NCCLWATCH_UNINSTRUMENTED bool may_name_cuda_entry(const char* name) {
  return name && name[0] == 'c' && name[1] == 'u' && (name[2] == 'G' || name[2] == 'S');
}

bool may_be_wrapped(void* handle, const char* name) {
  // RTLD_DEFAULT and RTLD_NEXT search the global scope, where our exports already come first.
  return handle != RTLD_DEFAULT && handle != RTLD_NEXT && bound_wrapper(0, name) != nullptr && config().record &&
         !another_shim_copy_traces();
}

// The lookup of an NCCL name, which may hand out a wrapper.
void* route_nccl_lookup(void* handle, const char* name, const void* caller, void* libc_dlsym, void** answer) {
  if (!may_be_wrapped(handle, name)) return libc_dlsym;
  void* found = real_dlsym(handle, name);
  *answer = found;
  if (found && !is_inside_shim(found)) {
    int slot = slot_for_library_of(found, caller);
    void* wrapper = slot >= 0 ? bound_wrapper(slot, name) : nullptr;
    if (wrapper && slot_serves(slot, name, found)) *answer = wrapper;
    // The lookups above left their own dlerror() state: the application's lookup comes last.
    real_dlsym(handle, name);
  }
  return nullptr;
}

// A global lookup (RTLD_DEFAULT, RTLD_NEXT) of a driver name the shim exports finds our export
// first: it may answer only where the driver itself has the function, or a feature probe would
// see what is not there. Where it has not, the answer is the driver's: none, with its dlerror().
void* route_global_cuda_lookup(const char* name, void* libc_dlsym, void** answer) {
  if (!is_interposed_cuda_entry(name)) return libc_dlsym;
  // The driver in a local scope (the CUDA runtime or Python opened it) is searched by its handle.
  if (void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) {
    void* found = real_dlsym(driver, name);
    dlclose(driver);
    if (found && !is_inside_shim(found)) return libc_dlsym;
  }
  // Last, so that its dlerror() state is the one the application reads.
  void* past_us = real_dlsym(RTLD_NEXT, name);
  if (past_us && !is_inside_shim(past_us)) return libc_dlsym;
  *answer = nullptr;
  return nullptr;
}

// The lookup of a CUDA driver name: the graph entry points (and cuGetProcAddress) get wrappers.
void* route_cuda_lookup(void* handle, const char* name, void* libc_dlsym, void** answer) {
  if (handle == RTLD_DEFAULT || handle == RTLD_NEXT) return route_global_cuda_lookup(name, libc_dlsym, answer);
  if (!config().record) return libc_dlsym;
  void* found = real_dlsym(handle, name);
  if (!found) return libc_dlsym;
  // A handle whose scope holds us (dlopen(NULL), the program's own) found our export: as global.
  if (is_inside_shim(found)) return route_global_cuda_lookup(name, libc_dlsym, answer);
  void* wrapper = cuda_entry_wrapper_for_symbol(name, found);
  if (!wrapper) return libc_dlsym;
  *answer = wrapper;
  real_dlsym(handle, name);  // the application's lookup leaves the dlerror() state, as above
  return nullptr;
}

}  // namespace
}  // namespace ncclwatch

// Returns the function to jump to with dlsym's arguments (the C library's dlsym), or nullptr
// after storing the answer in *answer.
extern "C" __attribute__((visibility("hidden"), used)) NCCLWATCH_UNINSTRUMENTED void* ncclwatch_route_dlsym(
    void* handle, const char* name, const void* caller, void** answer) noexcept {
  using namespace ncclwatch;
  *answer = nullptr;
  void* libc_dlsym = real_dlsym_function();
  if (libc_dlsym && may_name_cuda_entry(name)) return route_cuda_lookup(handle, name, libc_dlsym, answer);
  if (libc_dlsym && !names_nccl(name)) return libc_dlsym;
  if (!libc_dlsym) {
    notice_once(Notice::kDlsymUnavailable, "ncclwatch: the C library's dlsym was not found; dlsym answers nothing");
    return nullptr;
  }
  return route_nccl_lookup(handle, name, caller, libc_dlsym, answer);
}

#if defined(__x86_64__)
// Stack at entry: return address at 0(%rsp), %rsp ≡ 8 (mod 16). Two pushes and 24 bytes bring
// it to 0 (mod 16) for the call; the answer slot is 8(%rsp), the return address 40(%rsp).
asm(R"(
  .text
  .globl dlsym
  .type dlsym, @function
  .p2align 4
dlsym:
  .cfi_startproc
  endbr64
  pushq %rdi
  .cfi_adjust_cfa_offset 8
  pushq %rsi
  .cfi_adjust_cfa_offset 8
  subq $24, %rsp
  .cfi_adjust_cfa_offset 24
  movq 40(%rsp), %rdx
  leaq 8(%rsp), %rcx
  call ncclwatch_route_dlsym
  movq 8(%rsp), %rcx
  addq $24, %rsp
  .cfi_adjust_cfa_offset -24
  popq %rsi
  .cfi_adjust_cfa_offset -8
  popq %rdi
  .cfi_adjust_cfa_offset -8
  testq %rax, %rax
  jz 1f
  jmpq *%rax
1:
  movq %rcx, %rax
  ret
  .cfi_endproc
  .size dlsym, .-dlsym
)");
#elif defined(__aarch64__)
// The same with the link register: x30 holds the caller's return address at entry and again
// when we branch (not call) to the C library's dlsym.
asm(R"(
  .text
  .globl dlsym
  .type dlsym, %function
  .p2align 4
dlsym:
  .cfi_startproc
  hint #34  // bti c, spelled so any assembler takes it
  stp x29, x30, [sp, #-48]!
  .cfi_def_cfa_offset 48
  .cfi_offset x29, -48
  .cfi_offset x30, -40
  mov x29, sp
  stp x0, x1, [sp, #16]
  mov x2, x30
  add x3, sp, #32
  bl ncclwatch_route_dlsym
  mov x16, x0
  ldr x9, [sp, #32]
  ldp x0, x1, [sp, #16]
  ldp x29, x30, [sp], #48
  .cfi_def_cfa_offset 0
  cbz x16, 1f
  br x16
1:
  mov x0, x9
  ret
  .cfi_endproc
  .size dlsym, .-dlsym
)");
#else
#error "dlsym_hook.cc: no dlsym stub for this architecture"
#endif
