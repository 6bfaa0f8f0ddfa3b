// Opens a library with RTLD_LOCAL and runs its job; this program itself knows nothing of NCCL.
#include <dlfcn.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  if (dlsym(RTLD_NEXT, "pncclCommInitRank") || dlsym(RTLD_DEFAULT, "pncclCommInitRank")) {
    std::fprintf(stderr, "NCCL is visible in the global scope: this test would prove nothing\n");
    return 2;
  }
  auto run = reinterpret_cast<int (*)()>(dlsym(lib, "run_leaky_job"));
  return run ? run() : 2;
}
