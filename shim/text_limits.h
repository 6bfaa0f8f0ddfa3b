// Text the shim copies into fixed-size places (the trace, the communicator table): cut only at
// a character boundary, and never keep what looks like a secret.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ncclwatch {

// The longest prefix of `text` of at most `max_bytes` that does not end inside a UTF-8 sequence.
inline size_t utf8_prefix_length(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text.size();
  size_t cut = max_bytes;
  // Step back over continuation bytes (10xxxxxx) to the start of the character the cut splits.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return cut;
}

// Replaces, in place, the values of command-line options whose name holds key, token, secret or
// password (`--api-key=VALUE`, `--api-key VALUE`) with "***".
void mask_secret_arguments(std::vector<std::string>& args);

}  // namespace ncclwatch
