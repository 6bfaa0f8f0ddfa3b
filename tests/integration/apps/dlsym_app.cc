// Reaches NCCL only through dlopen + dlsym(handle), as Python's ctypes, XLA's CUDA plugin and
// NVSHMEM do: no NCCL in its link map, so no call passes through the global scope. For each
// library path given: one single-rank communicator and one all-reduce; the communicators of
// every library but the last are destroyed, the last one is leaked on purpose.
#include <dlfcn.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>

namespace {

template <class Fn> Fn need(void* lib, const char* name) {
  auto fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn) {
    std::fprintf(stderr, "dlsym %s: %s\n", name, dlerror());
    std::exit(2);
  }
  return fn;
}

// dlsym(RTLD_NEXT) must still resolve relative to its caller, not to a preload that wraps dlsym:
// from here, the next dlsym after this program is the preload's own (when one is there).
bool rtld_next_is_relative_to_caller() {
  void* next = dlsym(RTLD_NEXT, "dlsym");
  void* first = dlsym(RTLD_DEFAULT, "dlsym");
  if (next != first) std::fprintf(stderr, "dlsym(RTLD_NEXT, \"dlsym\") = %p, global dlsym = %p\n", next, first);
  return next == first;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: dlsym_app LIBNCCL [LIBNCCL...]\n");
    return 2;
  }
  if (!rtld_next_is_relative_to_caller()) return 4;
  for (int i = 1; i < argc; ++i) {
    void* lib = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      std::fprintf(stderr, "dlopen %s: %s\n", argv[i], dlerror());
      return 2;
    }
    auto get_id = need<decltype(&ncclGetUniqueId)>(lib, "ncclGetUniqueId");
    auto init = need<decltype(&ncclCommInitRank)>(lib, "ncclCommInitRank");
    auto all_reduce = need<decltype(&ncclAllReduce)>(lib, "ncclAllReduce");
    auto destroy = need<decltype(&ncclCommDestroy)>(lib, "ncclCommDestroy");
    // The stand-in's streams live in its libcuda, found through the library's own scope.
    auto sync = need<int (*)(void*)>(lib, "cuStreamSynchronize");

    ncclUniqueId id;
    ncclComm_t comm = nullptr;
    float data[4] = {1, 2, 3, 4};
    if (get_id(&id) != ncclSuccess || init(&comm, 1, id, 0) != ncclSuccess ||
        all_reduce(data, data, 4, ncclFloat, ncclSum, comm, nullptr) != ncclSuccess || sync(nullptr) != 0) {
      std::fprintf(stderr, "NCCL calls through %s failed\n", argv[i]);
      return 3;
    }
    if (i + 1 < argc && destroy(comm) != ncclSuccess) return 3;
  }
  std::printf("dlsym_app: done\n");
  return 0;
}
