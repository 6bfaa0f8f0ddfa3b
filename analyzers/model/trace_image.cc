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

TraceImage::~TraceImage() {
  if (base_) munmap(base_, mapped_);
}

void TraceImage::find_extents(int fd, uint64_t file_size) {
  for (uint64_t at = 0; at < file_size;) {
    off_t data = lseek(fd, static_cast<off_t>(at), SEEK_DATA);
    if (data < 0) {
      // ENXIO: nothing but a hole from here on. Anything else: no SEEK_DATA here, all of it is data.
      if (errno != ENXIO) extents_.push_back({at, file_size});
      return;
    }
    auto begin = static_cast<uint64_t>(data);
    if (begin >= file_size) return;
    off_t hole = lseek(fd, data, SEEK_HOLE);
    uint64_t end = hole > data ? std::min(static_cast<uint64_t>(hole), file_size) : file_size;
    extents_.push_back({begin, end});
    at = end;
  }
}

bool TraceImage::load(const std::string& path, std::string& error, std::string& lost) {
  // O_NONBLOCK: opening a FIFO waits for a writer, forever; what is not a regular file is refused
  // before anything is read from it.
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    error = std::string("cannot open: ") + std::strerror(errno);
    return false;
  }
  struct CloseOnReturn {
    int fd;
    ~CloseOnReturn() { close(fd); }
  } closer{fd};
  struct stat st{};
  if (fstat(fd, &st) != 0) {
    error = std::string("cannot stat: ") + std::strerror(errno);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    error = std::string("not a regular file (") + file_kind(st.st_mode) + ")";
    return false;
  }
  auto file_size = static_cast<uint64_t>(st.st_size);
  if (file_size == 0) {
    error = "empty file";
    return false;
  }
  find_extents(fd, file_size);
  // A writer that died before its header may leave the first page a hole: the header checks read zeros.
  size_ = std::max(extents_.empty() ? 0 : extents_.back().end, std::min<uint64_t>(file_size, sizeof(trace::FileHeader)));
  auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  mapped_ = static_cast<size_t>((size_ + page - 1) / page * page);
  void* at = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (at == MAP_FAILED) {
    mapped_ = 0;
    error = fmt::format("cannot read its {} bytes: {}", size_, std::strerror(errno));
    return false;
  }
  base_ = static_cast<std::byte*>(at);
  for (size_t i = 0; i < extents_.size(); ++i) {
    for (uint64_t offset = extents_[i].begin; offset < extents_[i].end;) {
      ssize_t n = pread(fd, base_ + offset, std::min<uint64_t>(extents_[i].end - offset, 1u << 30), static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        // Cut short while being read (or unreadable from here): what came before stands, as for a
        // file its writer left short.
        lost = n == 0 ? fmt::format("the file shrank while being read (from {} bytes); read its first {}", file_size, offset)
                      : fmt::format("read error at offset {} ({}); read what came before", offset, std::strerror(errno));
        extents_[i].end = offset;
        extents_.resize(offset > extents_[i].begin ? i + 1 : i);
        size_ = offset;
        break;
      }
      offset += static_cast<uint64_t>(n);
    }
  }
  mprotect(base_, mapped_, PROT_READ);
  return true;
}

}  // namespace ncclwatch::model
