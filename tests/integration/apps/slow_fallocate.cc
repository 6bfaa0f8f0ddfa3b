// Preloaded by the signal test before the shim: every posix_fallocate (the shim's trace growth)
// takes SLOW_FALLOCATE_MS longer, so a signal lands inside trace growth often enough to test it.
// Both names defined by hand: with 64-bit offsets the header would make them one.
#undef _FILE_OFFSET_BITS
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace {
int slow_fallocate(int fd, off_t offset, off_t length) {
  const char* ms = std::getenv("SLOW_FALLOCATE_MS");
  usleep(static_cast<useconds_t>((ms ? std::atoi(ms) : 50) * 1000));
  return fallocate(fd, 0, offset, length) == 0 ? 0 : errno;
}
}  // namespace

extern "C" int posix_fallocate(int fd, off_t offset, off_t length) { return slow_fallocate(fd, offset, length); }
extern "C" int posix_fallocate64(int fd, off_t offset, off_t length) { return slow_fallocate(fd, offset, length); }
