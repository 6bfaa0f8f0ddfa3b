// Prints shim/site/python_layouts.h in python_layouts_probe.c's words, one block per version.
#include "site/python_layouts.h"

#include <cstdio>

int main() {
  using namespace ncclwatch::python;
  for (const Layout& l : kLayouts) {
    auto show = [](const char* name, long value) { std::printf("%s %ld\n", name, value); };
    show("minor", l.minor);
    show("thread_frame", l.thread_frame);
    show("thread_next", kThreadStateNext);
    show("cframe_current_frame", l.cframe_current_frame);
    show("frame_objects", l.frame_objects);
    show("frame_previous", l.frame_previous);
    show("frame_code", l.frame_code);
    show("frame_instruction", l.frame_instruction);
    show("frame_owner", l.frame_owner);
    if (l.frame_owner >= 0) show("owner_cstack", l.owner_cstack);
    show("code_instructions", l.code_instructions);
    show("code_name", l.code_name);
    show("frame_locals", l.frame_locals);
    show("code_local_names", l.code_local_names);
    show("tuple_size", kTupleSize);
    show("tuple_items", kTupleItems);
    show("code_filename", l.code_filename);
    show("code_first_line", l.code_first_line);
    show("ascii_header", l.ascii_header);
    show("compact_header", l.compact_header);
    show("object_type", kObjectType);
    show("string_length", kStringLength);
    show("string_state", kStringState);
    show("state_kind_7", long{kStateKindMask} << kStateKindShift);
    show("state_compact", kStateCompact);
    show("state_ascii", kStateAscii);
  }
  return 0;
}
