// Text the shim copies into fixed-size places (the trace, the communicator table) or prints: cut
// only at a character boundary, never keep what looks like a secret, never print control bytes.
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

// The masking rule is written out at the top of text_limits.cc (and in the README, "What a trace
// holds").

// The most bytes a trace keeps of one value (the command line, each environment variable's value).
inline constexpr size_t kMaxStoredValueBytes = 4096;

// Whether an option or variable name (`db-pass`, `hf_token`, `apiKey`, `NCCL_CLIENT_SECRET`) names a
// secret: one of its words is a secret word.
bool name_looks_secret(std::string_view name);

// Replaces, in place, secret-looking values in a command line with "***": values of secret-named
// options (`--name=VALUE`, `--name VALUE`, `name=VALUE`, `-p VALUE`) and credentials in URLs.
void mask_secret_arguments(std::vector<std::string>& args);

// `text` with the credentials of every URL in it masked: `scheme://user:***@host`, and
// `scheme://***@host` where the user part alone may be a token.
std::string mask_url_credentials(std::string_view text);

// One environment entry ("NAME=VALUE") as a trace stores it: the value masked when the name looks
// secret, URL credentials masked, the value capped.
std::string masked_environment_entry(std::string_view entry);

// `value` cut to at most `max_bytes` bytes (at a character boundary), the cut said at its end with
// the whole length.
std::string capped_value(std::string_view value, size_t max_bytes = kMaxStoredValueBytes);

// `text` safe to print on a terminal: bytes outside printable ASCII as \xNN, a backslash doubled,
// at most `max_bytes` bytes of it shown, the rest said as the whole length.
std::string printable(std::string_view text, size_t max_bytes);

}  // namespace ncclwatch
