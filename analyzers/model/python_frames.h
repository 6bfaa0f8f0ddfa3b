// The Python lines the shim records at a call (python_site.h in the shim): the program's frames
// and the PyTorch process group a communicator was made for.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ncclwatch::model {

// One Python frame of the code that made a communicator or resource (the shim keeps the
// program's own innermost frames, python_site.h).
struct PythonFrame {
  std::string file;
  int line = 0;
  std::string function;

  std::string describe() const;       // "/jobs/train.py:43 in main"
  std::string describe_short() const; // "train.py:43 (main)"
};

// "path\tline\tfunction\n" lines as the shim wrote them; malformed lines are skipped.
std::vector<PythonFrame> parse_python_site(std::string_view text);

// The PyTorch process group whose communicator the shim saw being made (its
// "process_group\t\tNAME\tDESC" line, python_site.h): eager init and new_group() after it.
struct ProcessGroupName {
  std::string name;  // PyTorch's group name ("0" for the default group, "1", ... or a hash)
  std::string desc;  // group_desc: "default_pg", what new_group(group_desc=...) was given, or "undefined"
  bool empty() const { return name.empty() && desc.empty(); }
  // "process group 3 \"tensor_parallel\"" ("undefined", PyTorch's word for none given, left out); "" when empty.
  std::string describe() const;
};
ProcessGroupName parse_process_group(std::string_view python_site_text);

// Where every Python thread of a process was, as a Stacks record says (trace_strings.h
// stacks_record): at most 64 threads of 64 frames are kept; and the native stack of one thread
// (the stalled op's issuer), as raw addresses for the symbolizer.
struct PythonStacks {
  std::string reason;  // trace::stacks_record::kStall or kRequested
  int64_t time_ns = 0;
  std::vector<std::vector<PythonFrame>> threads;  // each innermost first; newest thread first
  int native_tid = 0;
  std::vector<uint64_t> native_frames;  // innermost first (the program counter, then return addresses)
  std::string native_unread;            // why the native stack is not there, when the shim said
};
PythonStacks parse_python_stacks(std::string_view record_body, int64_t time_ns);

// A frame of PyTorch's, DeepEP's or the standard library's (as the shim tells them apart): a user
// wants the line of theirs that led there.
bool is_library_frame(const PythonFrame& frame);

// Where a thread is, for a person: its innermost frame of the program's own code (else its
// innermost frame); nullptr for an empty stack.
const PythonFrame* program_frame(const std::vector<PythonFrame>& stack);

}  // namespace ncclwatch::model
