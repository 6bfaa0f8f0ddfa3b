#include "process/file_replace.h"

#include "process/config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ncclwatch {
namespace {

bool write_all(int fd, std::string_view text) {
  for (size_t done = 0; done < text.size();) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = ENOSPC;  // nothing written, no error said: the disk is full for all we know
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Why `path` must not be replaced, or "" when it may be: the shim replaces only a regular file of
// its own user's, or creates one. rename() replaces whatever entry is there, so as root a
// metrics file of /dev/null once became a regular file; a FIFO, socket, symbolic link or someone
// else's file would have been replaced just the same. (Checked just before the temporary file is
// written: whoever could swap the entry in that moment can write in that folder anyway.)
std::string why_not_replaced(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return "";  // none yet (or the write says why it fails)
  if (S_ISLNK(st.st_mode)) return "it is a symbolic link";
  if (S_ISCHR(st.st_mode)) return "it is a character device";
  if (S_ISBLK(st.st_mode)) return "it is a block device";
  if (S_ISFIFO(st.st_mode)) return "it is a FIFO";
  if (S_ISSOCK(st.st_mode)) return "it is a socket";
  if (S_ISDIR(st.st_mode)) return "it is a directory";
  if (!S_ISREG(st.st_mode)) return "it is not a regular file";
  if (st.st_uid != ::geteuid())
    return "it is owned by uid " + std::to_string(st.st_uid) + ", not by this process's uid " + std::to_string(::geteuid());
  return "";
}

// Opens a new temporary file of ours: O_EXCL, so an entry already there (a FIFO would block the
// open, someone else's file would be truncated) is never opened. A regular file of ours of that
// name is a leftover of an earlier process with this pid, killed between write and rename.
int open_new_temporary(const std::string& temporary, unsigned mode) {
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW;
  int fd = ::open(temporary.c_str(), kFlags, mode);
  if (fd >= 0 || errno != EEXIST) return fd;
  struct stat st;
  bool leftover_of_ours = ::lstat(temporary.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid();
  if (leftover_of_ours && ::unlink(temporary.c_str()) == 0) return ::open(temporary.c_str(), kFlags, mode);
  errno = EEXIST;
  return -1;
}

}  // namespace

unsigned mode_beside_trace() noexcept { return config().group_readable ? 0640 : 0600; }

FileReplaced replace_file(const std::string& path, std::string_view text, std::string& why, unsigned mode) noexcept {
  try {
    why = why_not_replaced(path);
    if (!why.empty()) return FileReplaced::kRefused;
    // One per process: several processes given one path must not write into each other's.
    const std::string temporary = path + ".tmp." + std::to_string(::getpid());
    int fd = open_new_temporary(temporary, mode);
    bool ok = fd >= 0 && write_all(fd, text);
    if (fd >= 0) ok = ::close(fd) == 0 && ok;
    if (ok) ok = ::rename(temporary.c_str(), path.c_str()) == 0;
    if (ok) return FileReplaced::kYes;
    why = std::strerror(errno);
    if (fd >= 0) ::unlink(temporary.c_str());  // only a file this call made
    return FileReplaced::kFailed;
  } catch (...) {
    why = "out of memory";
    return FileReplaced::kFailed;
  }
}

}  // namespace ncclwatch
