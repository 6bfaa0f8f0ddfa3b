// What the analyzers say on standard error: problems with the input, refused options, progress.
// Every message goes through here, so that each names the tool as the others do and is written in
// one piece (reader threads report progress while others name problems).
#pragma once

#include "model/trace_text.h"

#include <fmt/format.h>

#include <string_view>
#include <utility>

namespace ncclwatch::model {

inline constexpr std::string_view kToolName = "ncclwatch-report";

// `line`, then a newline: a continuation of the message before, or progress. Its newlines are
// kept, every other control character escaped (printable_text).
void say_line(std::string_view line);

// "ncclwatch-report: <message>". Each text argument (a path, a name from a trace) is made
// printable, its newlines escaped too: a message is one line.
template <class... Args>
void say(fmt::format_string<printable_arg_t<Args>...> message, Args&&... args) {
  say_line(fmt::format("{}: {}", kToolName, fmt::format(message, printable_arg(std::forward<Args>(args))...)));
}

// "ncclwatch-report <report>: <message>": what one report refuses of its own options.
template <class... Args>
void say_in(std::string_view report, fmt::format_string<printable_arg_t<Args>...> message, Args&&... args) {
  say_line(fmt::format("{} {}: {}", kToolName, report, fmt::format(message, printable_arg(std::forward<Args>(args))...)));
}

}  // namespace ncclwatch::model
