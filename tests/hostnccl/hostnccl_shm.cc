#include "hostnccl_shm.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace hostnccl {

static_assert(sizeof(SegHeader) <= 128, "header must fit before the payload");

std::string shm_prefix(uint64_t tag) {
  char buf[48];
  snprintf(buf, sizeof buf, "/hostnccl-%016" PRIx64 "-", tag);
  return buf;
}

int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t stall_timeout_ns() {
  static const int64_t ns = [] {
    const char* env = getenv("HOSTNCCL_STALL_TIMEOUT_SEC");
    double sec = env ? atof(env) : 0.0;
    return sec > 0 ? int64_t(sec * 1e9) : int64_t(0);
  }();
  return ns;
}

// Short sleeps first so matched operations complete quickly, then up to 2 ms
// so blocked workers cost little CPU.
void backoff_sleep(int round) {
  long us = round < 10 ? 20 : round < 40 ? 200 : 2000;
  timespec ts{0, us * 1000};
  nanosleep(&ts, nullptr);
}

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this != &o) {
    reset();
    name_ = std::move(o.name_);
    base_ = o.base_;
    len_ = o.len_;
    o.base_ = nullptr;
    o.len_ = 0;
  }
  return *this;
}

Segment::~Segment() { reset(); }

void Segment::reset() {
  if (base_) munmap(base_, len_);
  base_ = nullptr;
  len_ = 0;
}

static void fatal(const char* what, const std::string& name) {
  fprintf(stderr, "hostnccl: %s %s: %s\n", what, name.c_str(), strerror(errno));
  abort();
}

Segment Segment::create(const std::string& name, size_t bytes, uint32_t expected_readers) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0 && errno == EEXIST) {
    // Left by a killed run that drew the same random key: take it over.
    shm_unlink(name.c_str());
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  }
  if (fd < 0) fatal("cannot create shared memory", name);
  Segment s;
  s.name_ = name;
  s.len_ = kPayloadOffset + bytes;
  if (ftruncate(fd, off_t(s.len_)) != 0) fatal("cannot size shared memory", name);
  s.base_ = mmap(nullptr, s.len_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (s.base_ == MAP_FAILED) {
    s.base_ = nullptr;
    fatal("cannot map shared memory", name);
  }
  SegHeader& h = s.header();
  h.expected_readers = expected_readers;
  h.bytes = bytes;
  return s;
}

void Segment::publish() {
  if (header().expected_readers == 0) shm_unlink(name_.c_str());
  header().ready.store(1, std::memory_order_release);
}

Segment Segment::open_published(const std::string& name) {
  Segment s;
  int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return s;
  struct stat st{};
  // Size 0: the owner has not sized it yet.
  if (fstat(fd, &st) != 0 || size_t(st.st_size) < kPayloadOffset) {
    close(fd);
    return s;
  }
  void* base = mmap(nullptr, size_t(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return s;
  s.name_ = name;
  s.base_ = base;
  s.len_ = size_t(st.st_size);
  SegHeader& h = s.header();
  if (h.ready.load(std::memory_order_acquire) == 0) {
    s.reset();
    return s;
  }
  if (h.readers.fetch_add(1) + 1 == h.expected_readers) shm_unlink(name.c_str());
  return s;
}

Wait exchange(const std::string& base, int me, int n, Segment mine, std::vector<Segment>& segs,
              const std::atomic<bool>& abort, const std::vector<bool>* excluded) {
  auto skip = [&](int r) { return excluded && (*excluded)[size_t(r)]; };
  segs.clear();
  segs.resize(size_t(n));
  mine.publish();
  segs[size_t(me)] = std::move(mine);
  int missing = 0;
  for (int r = 0; r < n; ++r) missing += (r != me && !skip(r)) ? 1 : 0;
  return wait_until(abort, [&] {
    for (int r = 0; r < n && missing > 0; ++r) {
      if (segs[size_t(r)] || skip(r)) continue;
      segs[size_t(r)] = Segment::open_published(base + "-" + std::to_string(r));
      if (segs[size_t(r)]) --missing;
    }
    return missing == 0;
  });
}

Ctl::Ctl(uint64_t tag) : tag_(tag) {
  std::string name = shm_prefix(tag) + "ctl";
  int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) fatal("cannot open shared memory", name);
  // Every rank sizes it: sizing to the same length keeps what others wrote.
  if (ftruncate(fd, 4096) != 0) fatal("cannot size shared memory", name);
  void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) fatal("cannot map shared memory", name);
  count_ = static_cast<std::atomic<int>*>(p);
}

Ctl::~Ctl() {
  if (count_) munmap(static_cast<void*>(count_), 4096);
}

void Ctl::detach(int nranks) {
  if (count_->fetch_add(1) + 1 == nranks) remove_all(tag_);
}

void remove_all(uint64_t tag) {
  std::string prefix = shm_prefix(tag).substr(1);
  DIR* d = opendir("/dev/shm");
  if (!d) return;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    if (strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) names.push_back(e->d_name);
  }
  closedir(d);
  for (const auto& n : names) shm_unlink(("/" + n).c_str());
}

}  // namespace hostnccl
