// How the reports write: text lines made printable, CSV as RFC 4180 has it, JSON streamed, and
// files replaced in one step (safely in a folder others can write).
#pragma once

#include "reports/options.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/types.h>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace ncclwatch::report {

// An array of a JSON report, made entry by entry as it is written (see write_json_streamed).
struct StreamedArray {
  std::string key;
  size_t size = 0;
  std::function<nlohmann::json(size_t)> entry;  // entry i, made when written
};
// Writes `head` with `arrays` in it, exactly as dump_json(…, 2) writes the whole object, without the
// whole ever being held: a job's tens of thousands of communicators take gigabytes as one tree.
void write_json_streamed(std::ostream& out, nlohmann::json head, const std::vector<StreamedArray>& arrays);

// Text reports' lines on standard output: as fmt::print, every text argument made printable
// (printable_text: names, hosts, paths, call sites and notices come from traces, and a terminal
// would act on the escape sequences they may hold).
template <class... Args>
void print_text(fmt::format_string<printable_arg_t<Args>...> format, Args&&... args) {
  fmt::print(format, printable_arg(std::forward<Args>(args))...);
}

// "4 KiB", "1.5 MiB": bytes as people read them (binary units, one decimal unless whole).
std::string bytes_text(uint64_t bytes);

// Writes `text` to standard output (path "" or "-") or to `path`, through a temporary file
// renamed over it; false (named on stderr) when that fails.
bool write_output_atomically(const std::string& path, const std::string& text);
// For the files the watcher keeps in a job's folder, which others may be able to write (verdict.json,
// watching, dump-now): `path` is replaced only when it is a regular file of this user's or absent,
// never written through a link, through an exclusive temporary name. False: `why` says why not.
bool write_shared_folder_file(const std::string& path, std::string_view text, mode_t mode, std::string& why);
// Why write_shared_folder_file() would refuse `path` ("" when it would not).
std::string why_not_replaced_in_shared_folder(const std::string& path);

// CSV as RFC 4180 writes it, shared by every report that has a table. A field holding a comma, a
// quote, CR or LF is quoted and its quotes doubled; rows end in "\n" (readers take it as CRLF).
std::string csv_field(std::string_view text);
// One row of `fields` (each through csv_field) on standard output.
void write_csv_row(const std::vector<std::string>& fields);

}  // namespace ncclwatch::report
