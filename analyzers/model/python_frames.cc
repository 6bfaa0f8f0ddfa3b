#include "model/python_frames.h"

#include "model/trace_text.h"

#include <ncclwatch/trace_format.h>
#include <ncclwatch/trace_strings.h>

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>

namespace ncclwatch::model {

std::string PythonFrame::describe() const { return fmt::format("{}:{} in {}", file, line, function); }

std::string PythonFrame::describe_short() const {
  size_t slash = file.rfind('/');
  return fmt::format("{}:{} ({})", slash == std::string::npos ? file : file.substr(slash + 1), line, function);
}

ProcessGroupName parse_process_group(std::string_view text) {
  const std::string_view kLead = trace::kProcessGroupLine;
  ProcessGroupName out;
  size_t at = text.find(kLead);
  if (at == std::string_view::npos || (at && text[at - 1] != '\n')) return out;
  std::string_view line = text.substr(at + kLead.size());
  line = line.substr(0, line.find('\n'));
  size_t tab = line.find('\t');
  out.name = valid_utf8(std::string(line.substr(0, tab)));
  if (tab != std::string_view::npos) out.desc = valid_utf8(std::string(line.substr(tab + 1)));
  return out;
}

std::string ProcessGroupName::describe() const {
  if (empty()) return "";
  std::string text = "process group " + name;
  if (!desc.empty() && desc != trace::kUndescribedGroup) text += " \"" + desc + "\"";
  return text;
}

std::vector<PythonFrame> parse_python_site(std::string_view text) {
  std::vector<PythonFrame> frames;
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    size_t tab = line.find('\t');
    size_t tab2 = tab == std::string_view::npos ? tab : line.find('\t', tab + 1);
    if (tab2 == std::string_view::npos) continue;
    PythonFrame frame{std::string(line.substr(0, tab)), 0, std::string(line.substr(tab2 + 1))};
    std::string_view number = line.substr(tab + 1, tab2 - tab - 1);
    auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), frame.line);
    if (ec != std::errc() || ptr != number.data() + number.size() || frame.file.empty()) continue;
    frames.push_back(std::move(frame));
  }
  return frames;
}

bool is_library_frame(const PythonFrame& frame) {
  const std::string& path = frame.file;
  if (path.rfind("<frozen ", 0) == 0) return true;
  if (path.find("/torch/") != std::string::npos || path.find("/deep_ep/") != std::string::npos) return true;
  return path.find("/lib/python3") != std::string::npos && path.find("-packages/") == std::string::npos;
}

const PythonFrame* program_frame(const std::vector<PythonFrame>& stack) {
  for (const PythonFrame& frame : stack)
    if (!is_library_frame(frame)) return &frame;
  return stack.empty() ? nullptr : &stack.front();
}

namespace {

// "tid addr addr ..." (hex) for kNative, "tid why" for kNativeUnread.
void parse_native_stack(std::string_view key, std::string_view value, PythonStacks& stacks) {
  constexpr size_t kMaxNativeFrames = 64;  // the shim writes at most 32
  std::string text(value);
  char* p = text.data();
  char* end = nullptr;
  long tid = std::strtol(p, &end, 10);
  if (end == p || tid <= 0 || tid > (1L << 30)) return;
  stacks.native_tid = static_cast<int>(tid);
  if (key == trace::stacks_record::kNativeUnread) {
    stacks.native_unread = std::string(end).substr(end[0] == ' ' ? 1 : 0);
    return;
  }
  for (p = end; *p && stacks.native_frames.size() < kMaxNativeFrames;) {
    uint64_t address = std::strtoull(p, &end, 16);
    if (end == p) break;
    stacks.native_frames.push_back(address);
    p = end;
  }
}

}  // namespace

PythonStacks parse_python_stacks(std::string_view record_body, int64_t time_ns) {
  constexpr size_t kMaxThreads = 64, kMaxFrames = 64;  // the shim writes at most 16 of 32
  PythonStacks stacks;
  stacks.time_ns = time_ns;
  trace::for_each_string(record_body, [&](std::string_view key, std::string_view value) {
    if (key == trace::stacks_record::kReason) stacks.reason = value;
    if (key == trace::stacks_record::kNative || key == trace::stacks_record::kNativeUnread)
      parse_native_stack(key, value, stacks);
    if (key != trace::stacks_record::kThread || stacks.threads.size() >= kMaxThreads) return;
    std::vector<PythonFrame> frames = parse_python_site(value);
    if (frames.size() > kMaxFrames) frames.resize(kMaxFrames);
    stacks.threads.push_back(std::move(frames));
  });
  return stacks;
}

}  // namespace ncclwatch::model
