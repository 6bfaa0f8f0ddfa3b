// Text from trace files, made fit for reports.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ncclwatch::model {

// Text in a trace (names, paths, call sites, the host) is whatever bytes the process had, or a
// damaged or hostile file's: reports write JSON, which must be UTF-8. Every string the reader hands
// on goes through valid_utf8, which replaces each byte that starts no valid UTF-8 sequence with
// U+FFFD. File names (bytes on Linux) are shown the same way.
std::string valid_utf8(std::string_view bytes);
// `len` bytes of a record at `p`, as valid UTF-8 text.
std::string record_text(const std::byte* p, size_t len);

}  // namespace ncclwatch::model
