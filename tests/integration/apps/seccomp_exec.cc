// Runs a program under a seccomp filter that kills the process at any of the named system calls,
// as container and sandbox policies may:
//   seccomp_exec SYSCALL... -- PROGRAM ARGS...
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

struct Named {
  const char* name;
  long number;
};
constexpr Named kSyscalls[] = {
    {"process_vm_readv", SYS_process_vm_readv},
    {"process_vm_writev", SYS_process_vm_writev},
    {"ptrace", SYS_ptrace},
};

#if defined(__x86_64__)
constexpr unsigned kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr unsigned kArch = AUDIT_ARCH_AARCH64;
#endif

}  // namespace

int main(int argc, char** argv) {
  std::vector<long> killed;
  int i = 1;
  for (; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    bool known = false;
    for (const Named& s : kSyscalls)
      if (std::strcmp(argv[i], s.name) == 0) killed.push_back(s.number), known = true;
    if (!known) {
      std::fprintf(stderr, "seccomp_exec: unknown system call %s\n", argv[i]);
      return 2;
    }
  }
  if (i + 1 >= argc) {
    std::fprintf(stderr, "usage: seccomp_exec SYSCALL... -- PROGRAM ARGS...\n");
    return 2;
  }
  std::vector<sock_filter> filter = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
  };
  for (long number : killed) {
    filter.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<unsigned>(number), 0, 1));
    filter.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
  }
  filter.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  sock_fprog program{static_cast<unsigned short>(filter.size()), filter.data()};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    std::perror("seccomp_exec: installing the filter");
    return 2;
  }
  execvp(argv[i + 1], argv + i + 1);
  std::perror("seccomp_exec: exec");
  return 127;
}
