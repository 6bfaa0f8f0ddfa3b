// Replacing a small file beside the trace or where a setting points (the live metrics file, a
// watcher's progress file) in one step, safely: a temporary file of ours renamed over it. Only a
// regular file of this process's user is replaced (rename() replaces whatever entry is there: as
// root a metrics file of /dev/null once became a regular file), and the temporary file is created
// with O_EXCL | O_NOFOLLOW, so a planted FIFO, link or someone else's file is never opened.
#pragma once

#include <string>
#include <string_view>

namespace ncclwatch {

enum class FileReplaced { kYes, kRefused, kFailed };

// Writes `text` to `path` through `path.tmp.<pid>`. kRefused: `why` says what `path` is that it
// must not be replaced; kFailed: `why` is the error. Never throws.
// `mode`: the new file's (less the umask); files beside a trace pass mode_beside_trace().
FileReplaced replace_file(const std::string& path, std::string_view text, std::string& why, unsigned mode = 0644) noexcept;

// 0640 with NCCLWATCH_GROUP_READABLE=1, else 0600: as the trace itself.
unsigned mode_beside_trace() noexcept;

}  // namespace ncclwatch
