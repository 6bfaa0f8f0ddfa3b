// Defines NCCL's names itself, as stubs that load NCCL with dlopen and forward through dlsym
// (how XLA's CUDA plugin and TensorFlow reach NCCL). Those stubs are not a copy of NCCL: the
// shim must trace the calls they forward and not call the program "not traced".
//   stub_app            one communicator through the stubs, leaked
//   stub_app --idle     no NCCL call at all
#include <dlfcn.h>
#include <nccl.h>

#include <cstdio>
#include <cstring>

namespace {
void* nccl_function(const char* name) {
  static void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  return lib ? dlsym(lib, name) : nullptr;
}
}  // namespace

extern "C" ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  static auto real = reinterpret_cast<decltype(&ncclGetUniqueId)>(nccl_function("ncclGetUniqueId"));
  return real ? real(id) : ncclSystemError;
}

extern "C" ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  static auto real = reinterpret_cast<decltype(&ncclCommInitRank)>(nccl_function("ncclCommInitRank"));
  return real ? real(comm, nranks, id, rank) : ncclSystemError;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--idle") == 0) {
    std::printf("stub_app: idle\n");
    return 0;
  }
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) return 3;
  std::printf("stub_app: done\n");
  return 0;
}
