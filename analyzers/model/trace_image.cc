#include "model/trace_image.h"

#include <ncclwatch/trace_format.h>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ncclwatch::model {
namespace {

const char* file_kind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

}  // namespace

namespace {

// The last mapping a thread released, for its next file: a fresh one costs a page fault and the
// zeroing of every page before the copy, which took as long as the reading. Only a file with no
// holes reuses it, as every byte of it is then read over what the last file left.
struct SpareMapping {
  std::byte* base = nullptr;
  size_t bytes = 0;
  ~SpareMapping() {
    if (base) munmap(base, bytes);
  }
};
thread_local SpareMapping t_spare;
constexpr size_t kMaxSpareBytes = size_t{1} << 30;

}  // namespace

TraceImage::~TraceImage() { release(); }

void TraceImage::release() {
  if (base_ && mapped_ <= kMaxSpareBytes && mapped_ > t_spare.bytes) {
    if (t_spare.base) munmap(t_spare.base, t_spare.bytes);
    t_spare.base = base_;
    t_spare.bytes = mapped_;
  } else if (base_) {
    munmap(base_, mapped_);
  }
  base_ = nullptr;
  mapped_ = 0;
  open_ = false;
  close_file();
}

void TraceImage::close_file() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void TraceImage::find_extents(uint64_t file_size) {
  for (uint64_t at = 0; at < file_size;) {
    off_t data = lseek(fd_, static_cast<off_t>(at), SEEK_DATA);
    if (data < 0) {
      // ENXIO: nothing but a hole from here on. Anything else: no SEEK_DATA here, all of it is data.
      if (errno != ENXIO) extents_.push_back({at, file_size});
      return;
    }
    auto begin = static_cast<uint64_t>(data);
    if (begin >= file_size) return;
    off_t hole = lseek(fd_, data, SEEK_HOLE);
    uint64_t end = hole > data ? std::min(static_cast<uint64_t>(hole), file_size) : file_size;
    extents_.push_back({begin, end});
    at = end;
  }
}

bool TraceImage::open(const std::string& path, std::string& error) {
  release();
  extents_.clear();
  read_end_ = bytes_read_ = 0;
  // O_NONBLOCK: opening a FIFO waits for a writer, forever; what is not a regular file is refused
  // before anything is read from it.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd_ < 0) {
    error = std::string("cannot open: ") + std::strerror(errno);
    return false;
  }
  auto fail = [&](std::string why) {
    error = std::move(why);
    close_file();
    return false;
  };
  struct stat st{};
  if (fstat(fd_, &st) != 0) return fail(std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return fail(std::string("not a regular file (") + file_kind(st.st_mode) + ")");
  file_size_ = static_cast<uint64_t>(st.st_size);
  if (file_size_ == 0) return fail("empty file");
  find_extents(file_size_);
  // A writer that died before its header may leave the first page a hole: the header checks read zeros.
  size_ = std::max(extents_.empty() ? 0 : extents_.back().end, std::min<uint64_t>(file_size_, sizeof(trace::FileHeader)));
  dense_ = extents_.size() == 1 && extents_[0].begin == 0 && extents_[0].end == size_;
  open_ = true;
  return true;
}

bool TraceImage::make_room(uint64_t want, std::string& error) {
  if (want <= mapped_) return true;
  auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  auto bytes = static_cast<size_t>((want + page - 1) / page * page);
  std::byte* at = nullptr;
  if (dense_ && t_spare.base && t_spare.bytes >= bytes && mprotect(t_spare.base, t_spare.bytes, PROT_READ | PROT_WRITE) == 0) {
    at = t_spare.base;
    bytes = t_spare.bytes;
    t_spare.base = nullptr;
    t_spare.bytes = 0;
  } else {
    void* fresh = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (fresh == MAP_FAILED) {
      error = fmt::format("cannot read its {} bytes: {}", size_, std::strerror(errno));
      return false;
    }
    // Large pages: faulting the copy in 4 KiB at a time cost more than the copy itself.
    madvise(fresh, bytes, MADV_HUGEPAGE);
    at = static_cast<std::byte*>(fresh);
  }
  // What a prefix read so far moves along (from memory: the file is read once).
  if (base_) {
    std::memcpy(at, base_, static_cast<size_t>(read_end_));
    munmap(base_, mapped_);
  }
  base_ = at;
  mapped_ = bytes;
  return true;
}

bool TraceImage::read_upto(std::string& lost, std::string& error, uint64_t limit) {
  if (fd_ < 0 || read_end_ >= size_) return open_;
  uint64_t want = std::min(limit, size_);
  if (!make_room(want, error)) {
    release();
    return false;
  }
  for (size_t i = 0; i < extents_.size() && extents_[i].begin < want; ++i) {
    for (uint64_t offset = std::max(extents_[i].begin, read_end_); offset < std::min(extents_[i].end, want);) {
      ssize_t n = pread(fd_, base_ + offset, std::min<uint64_t>(std::min(extents_[i].end, want) - offset, 1u << 30),
                        static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        // Cut short while being read (or unreadable from here): what came before stands, as for a
        // file its writer left short.
        lost = n == 0 ? fmt::format("the file shrank while being read (from {} bytes); read its first {}", file_size_, offset)
                      : fmt::format("read error at offset {} ({}); read what came before", offset, std::strerror(errno));
        extents_[i].end = offset;
        extents_.resize(offset > extents_[i].begin ? i + 1 : i);
        size_ = read_end_ = offset;
        close_file();
        return true;
      }
      offset += static_cast<uint64_t>(n);
      bytes_read_ += static_cast<uint64_t>(n);
    }
  }
  read_end_ = want;
  if (!complete()) return true;
  close_file();
  mprotect(base_, mapped_, PROT_READ);
  return true;
}

bool TraceImage::load(const std::string& path, std::string& error, std::string& lost) {
  return open(path, error) && read_upto(lost, error);
}

}  // namespace ncclwatch::model
