// The ways a process image ends without exit(): _exit()/_Exit() called directly, and the exec
// family. Each ends the trace as the image ends (exit_hooks.h), then does what it does. In the
// preloaded library only: test programs that link the shim's objects keep their own.
//
// The C library's functions are found at load time, never in the call: a vfork child calls these
// while other threads of its parent may hold the dynamic loader's lock.
#include "exit/exit_hooks.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>


namespace {

using ExitFn = void (*)(int);
using ExecveFn = int (*)(const char*, char* const[], char* const[]);
using ExecvFn = int (*)(const char*, char* const[]);
using FexecveFn = int (*)(int, char* const[], char* const[]);

ExitFn g_exit = nullptr, g_Exit = nullptr;
ExecveFn g_execve = nullptr, g_execvpe = nullptr;
ExecvFn g_execv = nullptr, g_execvp = nullptr;
FexecveFn g_fexecve = nullptr;

template <class Fn> void find_next(Fn& fn, const char* name) { fn = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name)); }

__attribute__((constructor)) void find_image_end_functions() {
  find_next(g_exit, "_exit");
  find_next(g_Exit, "_Exit");
  find_next(g_execve, "execve");
  find_next(g_execvpe, "execvpe");
  find_next(g_execv, "execv");
  find_next(g_execvp, "execvp");
  find_next(g_fexecve, "fexecve");
}

[[noreturn]] void end_now(ExitFn fn, int status) {
  ncclwatch::image_ends_by_quick_exit(status);
  if (fn) fn(status);
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}

// Runs the exec; it returns only when it failed.
template <class Exec> int exec_image(Exec&& exec) {
  if (!exec.fn) {
    errno = ENOSYS;
    return -1;
  }
  ncclwatch::image_ends_by_exec();
  int result = exec();
  int saved_errno = errno;
  ncclwatch::exec_failed();
  errno = saved_errno;
  return result;
}

template <class Fn, class Call> struct Exec {
  Fn fn;
  Call call;
  int operator()() { return call(fn); }
};
template <class Fn, class Call> Exec<Fn, Call> make_exec(Fn fn, Call call) { return {fn, call}; }

// The number of execl's arguments after `first`, up to and with its NULL.
size_t count_args(const char* first, va_list& args) {
  size_t n = 1;
  if (first)
    while (va_arg(args, char*)) ++n;
  return n;
}

// execl's arguments as the argv execv takes, into `argv` (count_args() + 1 entries). On the stack:
// a vfork child must not allocate.
void collect_args(const char* first, va_list& args, char** argv) {
  size_t i = 0;
  argv[i++] = const_cast<char*>(first);
  while (argv[i - 1]) argv[i++] = va_arg(args, char*);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"), noreturn)) void _exit(int status) { end_now(g_exit, status); }
// noexcept where the C library declares them so (__THROW).
__attribute__((visibility("default"), noreturn)) void _Exit(int status) noexcept { end_now(g_Exit, status); }

__attribute__((visibility("default"))) int execve(const char* path, char* const argv[], char* const envp[]) noexcept {
  return exec_image(make_exec(g_execve, [&](ExecveFn fn) { return fn(path, argv, envp); }));
}
__attribute__((visibility("default"))) int execvpe(const char* file, char* const argv[], char* const envp[]) noexcept {
  return exec_image(make_exec(g_execvpe, [&](ExecveFn fn) { return fn(file, argv, envp); }));
}
__attribute__((visibility("default"))) int execv(const char* path, char* const argv[]) noexcept {
  return exec_image(make_exec(g_execv, [&](ExecvFn fn) { return fn(path, argv); }));
}
__attribute__((visibility("default"))) int execvp(const char* file, char* const argv[]) noexcept {
  return exec_image(make_exec(g_execvp, [&](ExecvFn fn) { return fn(file, argv); }));
}
__attribute__((visibility("default"))) int fexecve(int fd, char* const argv[], char* const envp[]) noexcept {
  return exec_image(make_exec(g_fexecve, [&](FexecveFn fn) { return fn(fd, argv, envp); }));
}

// The variadic forms as the C library builds them: an argv on the stack, then the array form.
#define NCCLWATCH_STACK_ARGV(first, last_named, argv)                                        \
  va_list args;                                                                              \
  va_start(args, last_named);                                                                \
  va_list counting;                                                                          \
  va_copy(counting, args);                                                                   \
  size_t argc_ = count_args(first, counting);                                                \
  va_end(counting);                                                                          \
  char** argv = static_cast<char**>(__builtin_alloca((argc_ + 1) * sizeof(char*)));          \
  collect_args(first, args, argv)

__attribute__((visibility("default"))) int execl(const char* path, const char* arg, ...) noexcept {
  NCCLWATCH_STACK_ARGV(arg, arg, argv);
  va_end(args);
  return execv(path, argv);
}
__attribute__((visibility("default"))) int execlp(const char* file, const char* arg, ...) noexcept {
  NCCLWATCH_STACK_ARGV(arg, arg, argv);
  va_end(args);
  return execvp(file, argv);
}
__attribute__((visibility("default"))) int execle(const char* path, const char* arg, ...) noexcept {
  NCCLWATCH_STACK_ARGV(arg, arg, argv);
  char* const* envp = va_arg(args, char* const*);
  va_end(args);
  return execve(path, argv, envp);
}

}  // extern "C"
