// Header-only helpers for test programs started by mprun.py: rank and size
// from the environment, and file-based rendezvous in the job's shared
// temporary folder (NCCLWATCH_TEST_RENDEZVOUS). Works with the real NCCL and
// with the stand-in alike: it only calls ncclGetUniqueId.
//
// Without mprun (no NCCLWATCH_TEST_* variables) a program is rank 0 of 1 and
// needs no folder.
#pragma once

#include <nccl.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>

inline int test_env_int(const char* name, int fallback) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}

inline int test_rank() { return test_env_int("NCCLWATCH_TEST_RANK", 0); }
inline int test_nranks() { return test_env_int("NCCLWATCH_TEST_NRANKS", 1); }

namespace rendezvous_detail {

constexpr int kTimeoutSec = 60;

inline std::string dir() {
  const char* d = getenv("NCCLWATCH_TEST_RENDEZVOUS");
  if (!d || !*d) {
    fprintf(stderr, "rendezvous: NCCLWATCH_TEST_RENDEZVOUS is not set (start the ranks with mprun.py)\n");
    abort();
  }
  return d;
}

inline bool exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// Polls until pred() holds; aborts after kTimeoutSec.
template <class F>
void wait_for(F&& pred, const std::string& what) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kTimeoutSec);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) {
      fprintf(stderr, "rendezvous: rank %d timed out after %d s waiting for %s\n", test_rank(), kTimeoutSec,
              what.c_str());
      abort();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// Writes the file under a temporary name, then renames it: readers never
// see a partial file.
inline void publish(const std::string& path, const void* data, size_t size) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  FILE* f = fopen(tmp.c_str(), "wb");
  if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
    fprintf(stderr, "rendezvous: cannot write %s\n", tmp.c_str());
    abort();
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    fprintf(stderr, "rendezvous: cannot rename %s\n", tmp.c_str());
    abort();
  }
}

// Each use of a tag gets its own generation, so barriers can repeat a tag.
inline int next_generation(const std::string& key) {
  static std::mutex mu;
  static std::map<std::string, int> generations;
  std::lock_guard<std::mutex> g(mu);
  return generations[key]++;
}

}  // namespace rendezvous_detail

// Rank 0 creates the id and publishes it; the other ranks wait for it.
inline ncclUniqueId rendezvous_unique_id(const char* tag = "world") {
  namespace rd = rendezvous_detail;
  ncclUniqueId id{};
  if (test_nranks() <= 1 && !getenv("NCCLWATCH_TEST_RENDEZVOUS")) {
    ncclGetUniqueId(&id);
    return id;
  }
  std::string path = rd::dir() + "/uid-" + tag + "-" + std::to_string(rd::next_generation(std::string("uid-") + tag));
  if (test_rank() == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
      fprintf(stderr, "rendezvous: ncclGetUniqueId failed: %d\n", int(r));
      abort();
    }
    rd::publish(path, &id, sizeof id);
    return id;
  }
  rd::wait_for([&] { return rd::exists(path); }, "unique id '" + std::string(tag) + "'");
  FILE* f = fopen(path.c_str(), "rb");
  if (!f || fread(&id, 1, sizeof id, f) != sizeof id) {
    fprintf(stderr, "rendezvous: cannot read %s\n", path.c_str());
    abort();
  }
  fclose(f);
  return id;
}

// Returns once every rank has reached the barrier with this tag.
inline void rendezvous_barrier(const char* tag) {
  namespace rd = rendezvous_detail;
  const int n = test_nranks();
  if (n <= 1 && !getenv("NCCLWATCH_TEST_RENDEZVOUS")) return;
  std::string prefix = rd::dir() + "/barrier-" + tag + "-" +
                       std::to_string(rd::next_generation(std::string("barrier-") + tag)) + "-";
  char one = 1;
  rd::publish(prefix + std::to_string(test_rank()), &one, 1);
  for (int r = 0; r < n; ++r) {
    rd::wait_for([&] { return rd::exists(prefix + std::to_string(r)); }, std::string("barrier '") + tag + "'");
  }
}
