#include "model/trace_text.h"

#include <fmt/format.h>

#include <algorithm>

namespace ncclwatch::model {
namespace {

// Length of the valid UTF-8 sequence that starts at s[i] (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF), 0 when none does.
size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char second_min = 0x80, second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_min = 0xA0;  // overlong
    if (lead == 0xED) second_max = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_min = 0x90;  // overlong
    if (lead == 0xF4) second_max = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (i + length > s.size() || byte(i + 1) < second_min || byte(i + 1) > second_max) return 0;
  for (size_t k = 2; k < length; ++k)
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  return length;
}

}  // namespace

std::string valid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    if (size_t n = utf8_sequence_length(bytes, i)) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
      ++i;
    }
  }
  return out;
}

std::string printable_text(std::string_view text, LineBreaks line_breaks) {
  // Most text is printable ASCII: returned as it is without a look at each character's class.
  if (std::all_of(text.begin(), text.end(), [](char ch) { return ch >= 0x20 && ch != 0x7F; })) return std::string(text);
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    auto byte = static_cast<unsigned char>(text[i]);
    size_t n = utf8_sequence_length(text, i);
    if (n == 1 && ((byte >= 0x20 && byte != 0x7F) || (byte == '\n' && line_breaks == LineBreaks::kKept))) {
      out += text[i];
    } else if (n == 1 || n == 0) {
      out += fmt::format("\\x{:02x}", byte);  // C0, DEL, or a byte that is not UTF-8
    } else if (n == 2 && byte == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(text[i + 1]));  // C1: U+0080..U+009F
    } else {
      out.append(text.substr(i, n));
    }
    i += std::max<size_t>(n, 1);
  }
  return out;
}

std::string record_text(const std::byte* p, size_t len) {
  return valid_utf8(std::string_view(reinterpret_cast<const char*>(p), len));
}

}  // namespace ncclwatch::model
