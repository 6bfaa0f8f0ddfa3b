#include "model/diagnostics.h"

#include <cstdio>
#include <string>

namespace ncclwatch::model {

void say_line(std::string_view line) {
  std::string text = printable_text(line, LineBreaks::kKept);
  text += '\n';
  // One call: the stream's lock keeps another thread's message out of the middle of this one.
  std::fwrite(text.data(), 1, text.size(), stderr);
}

}  // namespace ncclwatch::model
