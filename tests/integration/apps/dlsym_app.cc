// Reaches NCCL only through dlopen + dlsym(handle), as Python's ctypes, XLA's CUDA plugin and
// NVSHMEM do: no NCCL in its link map, so no call passes through the global scope. For each
// library path given: one single-rank communicator and one all-reduce; the communicators of
// every library but the last are destroyed, the last one is leaked on purpose.
#include <dlfcn.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

// The lookup as dlsym(3) tells to check it: clear dlerror(), look up, then dlerror() must be NULL.
template <class Fn> Fn need(void* lib, const char* name) {
  dlerror();
  auto fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (const char* error = dlerror(); error || !fn) {
    std::fprintf(stderr, "dlsym %s: %s\n", name, error ? error : "NULL");
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

// Many threads look the same functions up in several copies at once: each copy must get one
// slot, so every thread must get the same answer for the same (copy, name).
int race(int nlibs, char** paths) {
  constexpr int kThreads = 16;
  const char* names[] = {"ncclCommInitRank", "ncclAllReduce", "ncclCommDestroy", "ncclGroupStart", "ncclSend"};
  constexpr int kNames = sizeof(names) / sizeof(names[0]);
  std::vector<void*> seen(size_t(kThreads) * size_t(nlibs) * kNames);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int l = 0; l < nlibs; ++l) {
        void* lib = dlopen(paths[(l + t) % nlibs], RTLD_NOW | RTLD_LOCAL);
        int at = (l + t) % nlibs;
        for (int n = 0; n < kNames; ++n) seen[(size_t(t) * nlibs + at) * kNames + n] = lib ? dlsym(lib, names[n]) : nullptr;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 1; t < kThreads; ++t) {
    if (std::memcmp(&seen[size_t(t) * nlibs * kNames], &seen[0], sizeof(void*) * nlibs * kNames) != 0) {
      std::fprintf(stderr, "thread %d got other answers than thread 0\n", t);
      return 5;
    }
  }
  for (void* p : seen)
    if (!p) return 5;
  std::printf("dlsym_app: %d threads agree\n", kThreads);
  return 0;
}

// A library that carries its own NCCL and calls it through its PLT, opened RTLD_LOCAL beside
// another libnccl (also local): without a preload its calls bind to its own copy, and the shim
// must send them there too, not to the other copy.
int embedded_beside(const char* other_nccl, const char* embedding_library) {
  if (!dlopen(other_nccl, RTLD_NOW | RTLD_LOCAL)) return 2;
  void* lib = dlopen(embedding_library, RTLD_NOW | RTLD_LOCAL);
  auto run = lib ? reinterpret_cast<int (*)()>(dlsym(lib, "run_embedded_job")) : nullptr;
  if (!run) {
    std::fprintf(stderr, "dlopen %s: %s\n", embedding_library, dlerror());
    return 2;
  }
  int status = run();
  std::printf("dlsym_app: embedded job done\n");
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: dlsym_app [--race] LIBNCCL [LIBNCCL...] | --embedded LIBNCCL LIBRARY\n");
    return 2;
  }
  if (std::strcmp(argv[1], "--race") == 0) return race(argc - 2, argv + 2);
  if (std::strcmp(argv[1], "--embedded") == 0 && argc == 4) return embedded_beside(argv[2], argv[3]);
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
