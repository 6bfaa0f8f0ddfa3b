// Text from trace files, made fit for reports.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace ncclwatch::model {

// Text in a trace (names, paths, call sites, the host) is whatever bytes the process had, or a
// damaged or hostile file's: reports write JSON, which must be UTF-8. Every string the reader hands
// on goes through valid_utf8, which replaces each byte that starts no valid UTF-8 sequence with
// U+FFFD. File names (bytes on Linux) are shown the same way.
std::string valid_utf8(std::string_view bytes);
// `len` bytes of a record at `p`, as valid UTF-8 text.
std::string record_text(const std::byte* p, size_t len);

// Text as a terminal may show it, for every text a report writes for people (JSON and CSV keep
// the text itself: their writers escape it for their own readers). A trace's names, hosts, paths
// and notices may hold terminal escape sequences (ESC ] 0 ; ... BEL retitles the window, ESC [ 31 m
// colours what follows) or line breaks that forge report lines. Each control character, C0 (tab
// and newline included), DEL and C1 (U+0080..U+009F), is written as \xNN (C0, DEL) or \u00NN (C1),
// each byte that starts no valid UTF-8 sequence as \xNN. A backslash stays as it is, so the result
// holds no control character and making it printable again changes nothing: a line made of text
// already printable may go through here once more. kKept keeps newlines: for a message of
// several lines, whose parts were made printable one by one.
enum class LineBreaks { kEscaped, kKept };
std::string printable_text(std::string_view text, LineBreaks line_breaks = LineBreaks::kEscaped);

// An argument of a message or of a report's text line: text made printable (printable_text), any
// other value as it is.
template <class T>
decltype(auto) printable_arg(T&& value) {
  if constexpr (std::is_convertible_v<const T&, std::string_view>)
    return printable_text(std::string_view(value));
  else
    return std::forward<T>(value);
}
// The type fmt deduces for printable_arg(value) passed on (an xvalue deduces as its value type):
// what a format string checked for the printable arguments names.
template <class T>
using printable_arg_t = std::conditional_t<std::is_rvalue_reference_v<decltype(printable_arg(std::declval<T>()))>,
                                           std::remove_reference_t<decltype(printable_arg(std::declval<T>()))>,
                                           decltype(printable_arg(std::declval<T>()))>;

}  // namespace ncclwatch::model
