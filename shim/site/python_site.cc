#include "site/python_site.h"

#include "process/process.h"
#include "resolve/resolve.h"
#include "site/own_memory.h"
#include "site/python_layouts.h"

#include <ncclwatch/trace_format.h>

#include <dlfcn.h>
#include <link.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <optional>
#include <string_view>

namespace ncclwatch {
namespace {

using python::Layout;

// What the reader needs from the interpreter: only functions that read (none takes the GIL or
// allocates), and the type objects that tell a code object or string from anything else.
struct Interpreter {
  Layout layout;
  int (*is_initialized)() = nullptr;
  int (*is_finalizing)() = nullptr;
  void* (*this_thread_state)() = nullptr;
  // Every thread's state, for stacks (optional: without them only the calling thread is read).
  void* (*main_interpreter)() = nullptr;
  void* (*thread_head)(void* interpreter) = nullptr;
  int (*address_to_line)(void* code, int byte_offset) = nullptr;
  uint64_t code_type = 0;
  uint64_t unicode_type = 0;
  uint64_t tuple_type = 0;
  uint64_t frame_type = 0;  // 3.9/3.10 frames are objects
};

enum class Availability { kNoPythonYet, kReady, kUnavailable };
std::atomic<Availability> g_availability{Availability::kNoPythonYet};
Interpreter g_interpreter;  // written once, before kReady is published
std::mutex g_resolve_mutex;

void give_up(const char* why) noexcept {
  g_availability.store(Availability::kUnavailable, std::memory_order_release);
  char line[256];
  std::snprintf(line, sizeof(line), "ncclwatch: Python creation sites are not recorded: %s", why);
  notice_once(Notice::kPythonSiteUnavailable, line);
}

template <typename Fn>
Fn find(const char* name) {
  return reinterpret_cast<Fn>(real_dlsym(RTLD_DEFAULT, name));
}

// How many objects the dynamic linker has loaded so far (dl_phdr_info.dlpi_adds).
unsigned long long objects_loaded() noexcept {
  unsigned long long adds = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        *static_cast<unsigned long long*>(out) = info->dlpi_adds;
        return 1;
      },
      &adds);
  return adds;
}
unsigned long long g_objects_when_looked = ~0ull;  // under g_resolve_mutex

// Looks for an interpreter in the process. Stays kNoPythonYet while there is none: a program may
// load Python after its first communicator, so it looks again, but only once objects were loaded
// since (a lookup in every object on each registration would cost a C++ job tens of µs per call).
void resolve() noexcept {
  std::lock_guard lock(g_resolve_mutex);
  if (g_availability.load(std::memory_order_relaxed) != Availability::kNoPythonYet) return;
  unsigned long long loaded = objects_loaded();
  if (loaded == g_objects_when_looked) return;
  g_objects_when_looked = loaded;
  auto version = find<const char* (*)()>("Py_GetVersion");
  if (!version) return;
  int major = 0, minor = 0;
  if (std::sscanf(version(), "%d.%d", &major, &minor) != 2) return give_up("Py_GetVersion() is unreadable");
  std::optional<Layout> layout = python::layout_for(major, minor);
  if (!layout || sizeof(void*) != 8) {
    char why[96];
    std::snprintf(why, sizeof(why), "CPython %d.%d is not a version this build knows (3.9 to 3.13)", major, minor);
    return give_up(why);
  }
  Interpreter& py = g_interpreter;
  py.layout = *layout;
  py.is_initialized = find<int (*)()>("Py_IsInitialized");
  py.is_finalizing = find<int (*)()>("Py_IsFinalizing");
  if (!py.is_finalizing) py.is_finalizing = find<int (*)()>("_Py_IsFinalizing");
  py.this_thread_state = find<void* (*)()>("PyGILState_GetThisThreadState");
  py.main_interpreter = find<void* (*)()>("PyInterpreterState_Main");
  py.thread_head = find<void* (*)(void*)>("PyInterpreterState_ThreadHead");
  py.address_to_line = find<int (*)(void*, int)>("PyCode_Addr2Line");
  py.code_type = reinterpret_cast<uint64_t>(find<void*>("PyCode_Type"));
  py.unicode_type = reinterpret_cast<uint64_t>(find<void*>("PyUnicode_Type"));
  py.tuple_type = reinterpret_cast<uint64_t>(find<void*>("PyTuple_Type"));
  py.frame_type = reinterpret_cast<uint64_t>(find<void*>("PyFrame_Type"));
  if (!py.is_initialized || !py.is_finalizing || !py.this_thread_state || !py.address_to_line || !py.code_type ||
      !py.unicode_type || !py.tuple_type || (py.layout.frame_objects && !py.frame_type))
    return give_up("the interpreter lacks a function or type the reader needs");
  g_availability.store(Availability::kReady, std::memory_order_release);
}

// Copies memory of this process, failing instead of faulting when an address is bad: the first
// line of defence against a layout we got wrong.
class MemoryReader {
 public:
  bool read(void* to, uint64_t from, size_t bytes) { return from >= 4096 && memory_.read(to, from, bytes); }

  template <typename T>
  bool read_at(T& value, uint64_t from) {
    return read(&value, from, sizeof(T));
  }

  bool failed() const { return !memory_.usable(); }

 private:
  OwnMemory memory_;
};

template <typename T>
T field(const unsigned char* bytes, uint32_t offset) {
  T value;
  std::memcpy(&value, bytes + offset, sizeof(T));
  return value;
}

// Appends the code point as UTF-8 if it fits.
size_t put_utf8(char* out, size_t room, uint32_t cp) {
  unsigned char b[4];
  size_t n;
  if (cp < 0x80) b[0] = static_cast<unsigned char>(cp), n = 1;
  else if (cp < 0x800) b[0] = 0xC0 | (cp >> 6), b[1] = 0x80 | (cp & 0x3F), n = 2;
  else if (cp < 0x10000) b[0] = 0xE0 | (cp >> 12), b[1] = 0x80 | ((cp >> 6) & 0x3F), b[2] = 0x80 | (cp & 0x3F), n = 3;
  else if (cp < 0x110000)
    b[0] = 0xF0 | (cp >> 18), b[1] = 0x80 | ((cp >> 12) & 0x3F), b[2] = 0x80 | ((cp >> 6) & 0x3F), b[3] = 0x80 | (cp & 0x3F), n = 4;
  else b[0] = '?', n = 1;
  if (n > room) return 0;
  std::memcpy(out, b, n);
  return n;
}

// A str object's text as UTF-8 (cut to `size`-1 bytes); false if it is not a compact str.
bool read_string(MemoryReader& memory, const Interpreter& py, uint64_t object, char* out, size_t size) {
  out[0] = '\0';
  // One read for the header and the text of most names; a second when the text is longer, or
  // when reading past a short string's end reached unmapped memory.
  constexpr size_t kMaxChars = 256;
  constexpr size_t kFirstRead = 256;
  unsigned char header[kFirstRead] = {};
  const Layout& l = py.layout;
  size_t got = kFirstRead;
  if (!memory.read(header, object, got)) {
    got = l.ascii_header;
    if (!memory.read(header, object, got)) return false;
  }
  if (field<uint64_t>(header, python::kObjectType) != py.unicode_type) return false;
  uint32_t state = field<uint32_t>(header, python::kStringState);
  int64_t length = field<int64_t>(header, python::kStringLength);
  if (!(state & python::kStateCompact) || length < 0) return false;
  uint32_t kind = (state >> python::kStateKindShift) & python::kStateKindMask;
  if (kind != 1 && kind != 2 && kind != 4) return false;
  size_t data_offset = (state & python::kStateAscii) ? l.ascii_header : l.compact_header;
  size_t chars = static_cast<size_t>(std::min<int64_t>(length, kMaxChars));
  unsigned char raw[kMaxChars * 4] = {};
  if (data_offset + chars * kind <= got) std::memcpy(raw, header + data_offset, chars * kind);
  else if (!memory.read(raw, object + data_offset, chars * kind)) return false;
  size_t used = 0;
  for (size_t i = 0; i < chars; ++i) {
    uint32_t cp = kind == 1 ? raw[i] : kind == 2 ? field<uint16_t>(raw, i * 2) : field<uint32_t>(raw, i * 4);
    size_t n = put_utf8(out + used, size - 1 - used, cp);
    if (!n) break;
    used += n;
  }
  out[used] = '\0';
  return true;
}

// PyTorch's, DeepEP's and the standard library's own frames: a user wants the line of theirs
// that led there.
bool is_library_path(const char* path) {
  if (std::strncmp(path, "<frozen ", 8) == 0) return true;
  if (std::strstr(path, "/torch/") || std::strstr(path, "/deep_ep/")) return true;
  return std::strstr(path, "/lib/python3") && !std::strstr(path, "-packages/");
}

struct FrameText {
  char text[kMaxPythonFrames][704];  // a path, a line and a function (read_string cuts them to fit)
  int count = 0;

  void add(const char* path, int line, const char* function) {
    if (count < kMaxPythonFrames) std::snprintf(text[count++], sizeof(text[0]), "%s\t%d\t%s\n", path, line, function);
  }
};

// The PyTorch process group whose communicator is being made: torch.distributed's
// _new_process_group_helper(..., group_name, ..., group_desc) has both as locals while it makes
// the group's communicator eagerly (init_process_group(device_id=...), and new_group() after it),
// and so has split_group(..., group_desc), which DeviceMesh uses ("mesh_dp", "mesh_tp"). A lazily
// made group's communicator comes at its first collective, with no such frame.
struct ProcessGroupNames {
  char name[128] = {};
  char desc[128] = {};
  bool found() const { return name[0] || desc[0]; }
};
bool makes_process_group(const char* function) {
  return std::strcmp(function, "_new_process_group_helper") == 0 || std::strcmp(function, "split_group") == 0;
}

// Reads the str locals `group_name` and `group_desc` of the frame at `frame` (whose code object
// `code` is copied in `code_bytes`). Unreadable or absent: left empty.
void read_process_group_names(MemoryReader& memory, const Interpreter& py, uint64_t frame, const unsigned char* code_bytes,
                              ProcessGroupNames& out) {
  const Layout& l = py.layout;
  uint64_t names = field<uint64_t>(code_bytes, l.code_local_names);
  unsigned char tuple[python::kTupleItems] = {};
  if (!memory.read(tuple, names, sizeof(tuple)) || field<uint64_t>(tuple, python::kObjectType) != py.tuple_type) return;
  constexpr int64_t kMaxLocals = 128;
  int64_t count = std::min(field<int64_t>(tuple, python::kTupleSize), kMaxLocals);
  if (count <= 0) return;
  uint64_t name_objects[kMaxLocals] = {}, values[kMaxLocals] = {};
  size_t bytes = static_cast<size_t>(count) * sizeof(uint64_t);
  if (!memory.read(name_objects, names + python::kTupleItems, bytes) || !memory.read(values, frame + l.frame_locals, bytes))
    return;
  for (int64_t i = 0; i < count; ++i) {
    char local[32];
    if (!values[i] || !read_string(memory, py, name_objects[i], local, sizeof(local))) continue;
    // A value that is not a str (None, a cell) is left out.
    if (std::strcmp(local, "group_name") == 0) read_string(memory, py, values[i], out.name, sizeof(out.name));
    else if (std::strcmp(local, "group_desc") == 0) read_string(memory, py, values[i], out.desc, sizeof(out.desc));
  }
}

enum class Walk { kDone, kLayoutMismatch, kUnreadable };

// Calls on_frame(memory, frame, code_bytes, path, line, function) for each Python frame of
// `thread_state`, innermost first, until it returns false.
template <class OnFrame> Walk walk_frames(const Interpreter& py, void* thread_state, OnFrame&& on_frame) {
  const Layout& l = py.layout;
  MemoryReader memory;
  uint64_t frame = 0;
  if (!memory.read_at(frame, reinterpret_cast<uint64_t>(thread_state) + l.thread_frame))
    return memory.failed() ? Walk::kUnreadable : Walk::kLayoutMismatch;
  if (l.cframe_current_frame >= 0 && frame && !memory.read_at(frame, frame + static_cast<uint32_t>(l.cframe_current_frame)))
    return Walk::kLayoutMismatch;
  constexpr int kMaxDepth = 1024;  // a cycle would mean a layout we got wrong
  for (int depth = 0; frame && depth < kMaxDepth; ++depth) {
    unsigned char f[python::kMaxFrameBytes] = {};
    if (!memory.read(f, frame, l.frame_size)) return Walk::kLayoutMismatch;
    if (l.frame_objects && field<uint64_t>(f, python::kObjectType) != py.frame_type) return Walk::kLayoutMismatch;
    uint64_t previous = field<uint64_t>(f, l.frame_previous);
    if (l.frame_owner >= 0 && f[l.frame_owner] == l.owner_cstack) {  // an entry shim, not Python code
      frame = previous;
      continue;
    }
    uint64_t code = field<uint64_t>(f, l.frame_code);
    unsigned char c[python::kMaxCodeBytes] = {};
    if (!memory.read(c, code, l.code_size) || field<uint64_t>(c, python::kObjectType) != py.code_type)
      return Walk::kLayoutMismatch;
    int64_t byte_offset;
    if (l.frame_objects) {
      byte_offset = field<int32_t>(f, l.frame_instruction);
      if (l.lasti_in_code_units && byte_offset > 0) byte_offset *= 2;
    } else {
      byte_offset = static_cast<int64_t>(field<uint64_t>(f, l.frame_instruction) - (code + l.code_instructions));
    }
    // A frame that has not run its first instruction sits on its definition line.
    int line = byte_offset >= 0 && byte_offset < (1 << 30)
                   ? py.address_to_line(reinterpret_cast<void*>(code), static_cast<int>(byte_offset))
                   : field<int32_t>(c, l.code_first_line);
    char path[512] = {}, function[128] = {};
    if (!read_string(memory, py, field<uint64_t>(c, l.code_filename), path, sizeof(path)) ||
        !read_string(memory, py, field<uint64_t>(c, l.code_name), function, sizeof(function)))
      return Walk::kLayoutMismatch;
    if (!on_frame(memory, frame, c, path, line, function)) break;
    frame = previous;
  }
  return Walk::kDone;
}

// The program's own frames (up to kMaxPythonFrames) and the libraries' of the calling thread, and
// the process group a frame of PyTorch's is making.
Walk walk_site_frames(const Interpreter& py, void* thread_state, FrameText& user, FrameText& library,
                      ProcessGroupNames& group) {
  return walk_frames(py, thread_state,
                     [&](MemoryReader& memory, uint64_t frame, const unsigned char* code, const char* path, int line,
                         const char* function) {
                       bool in_library = is_library_path(path);
                       (in_library ? library : user).add(path, line, function);
                       if (in_library && !group.found() && makes_process_group(function))
                         read_process_group_names(memory, py, frame, code, group);
                       return user.count < kMaxPythonFrames;
                     });
}

// Why the Python reader gives up after a walk that did not finish.
void give_up_after(Walk walk, const Interpreter& py) {
  if (walk == Walk::kUnreadable)
    return give_up("this process cannot read its own memory (/proc/self/mem refused, process_vm_readv unsafe or refused)");
  char why[128];
  std::snprintf(why, sizeof(why), "the Python stack does not have CPython 3.%d's layout (a debug or free-threaded build?)",
                py.layout.minor);
  give_up(why);
}

// The interpreter, once ready to be read (found, initialized, not finalizing), else nullptr.
const Interpreter* ready_interpreter() noexcept {
  Availability availability = g_availability.load(std::memory_order_acquire);
  if (availability == Availability::kNoPythonYet) {
    resolve();
    availability = g_availability.load(std::memory_order_acquire);
  }
  if (availability != Availability::kReady) return nullptr;
  const Interpreter& py = g_interpreter;
  // A finalizing interpreter frees other threads' states.
  return py.is_initialized() && !py.is_finalizing() ? &py : nullptr;
}

}  // namespace

void capture_python_site(char* out, size_t size) noexcept {
  if (size) out[0] = '\0';
  if (size < 2) return;
  const Interpreter* ready = ready_interpreter();
  if (!ready) return;
  const Interpreter& py = *ready;
  void* thread_state = py.this_thread_state();
  if (!thread_state) return;  // a thread Python never saw
  FrameText user, library;
  ProcessGroupNames group;
  if (Walk walk = walk_site_frames(py, thread_state, user, library, group); walk != Walk::kDone)
    return give_up_after(walk, py);
  const FrameText& shown = user.count ? user : library;
  size_t used = 0;
  for (int i = 0; i < shown.count; ++i) {
    size_t n = std::strlen(shown.text[i]);
    if (used + n >= size) break;
    std::memcpy(out + used, shown.text[i], n);
    used += n;
  }
  if (group.found() && used < size)
    used += static_cast<size_t>(std::max(0, std::snprintf(out + used, size - used, "%s%s\t%s\n", trace::kProcessGroupLine,
                                                          group.name, group.desc)));
  out[std::min(used, size - 1)] = '\0';
}

size_t capture_python_stacks(char* out, size_t size) noexcept {
  if (size) out[0] = '\0';
  const Interpreter* ready = ready_interpreter();
  if (!ready || size < 2 || !ready->main_interpreter || !ready->thread_head) return 0;
  const Interpreter& py = *ready;
  void* interpreter = py.main_interpreter();
  void* thread = interpreter ? py.thread_head(interpreter) : nullptr;
  size_t used = 0, threads = 0;
  auto append = [&](const char* text) {
    size_t n = std::strlen(text);
    if (used + n >= size) return false;
    std::memcpy(out + used, text, n);
    used += n;
    return true;
  };
  MemoryReader memory;
  for (; thread && threads < kMaxStackThreads; ++threads) {
    int frames = 0;
    bool room = true;
    Walk walk = walk_frames(py, thread, [&](MemoryReader&, uint64_t, const unsigned char*, const char* path, int line,
                                            const char* function) {
      char text[704];
      std::snprintf(text, sizeof(text), "%s\t%d\t%s\n", path, line, function);
      room = append(text);
      return room && ++frames < kMaxStackFrames;
    });
    // A thread that was running Python while read may show a torn frame: its stack ends there.
    if (walk == Walk::kUnreadable || !room || !append("\n")) break;
    uint64_t next = 0;
    if (!memory.read_at(next, reinterpret_cast<uint64_t>(thread) + python::kThreadStateNext)) break;
    thread = reinterpret_cast<void*>(next);
  }
  out[std::min(used, size - 1)] = '\0';
  return threads;
}

void python_site_after_fork_in_child() noexcept {
  new (&g_resolve_mutex) std::mutex();  // the interpreter found (or not) before the fork stays valid
  g_objects_when_looked = ~0ull;
}

void short_python_site(const char* site, char* out, size_t size) noexcept {
  if (!size) return;
  out[0] = '\0';
  const char* tab = std::strchr(site, '\t');
  if (!tab) return;
  const char* path_end = tab;
  const char* base = site;
  for (const char* p = site; p < path_end; ++p)
    if (*p == '/') base = p + 1;
  const char* line = tab + 1;
  const char* tab2 = std::strchr(line, '\t');
  if (!tab2) return;
  const char* function = tab2 + 1;
  const char* end = std::strchr(function, '\n');
  if (!end) end = function + std::strlen(function);
  std::snprintf(out, size, "%.*s:%.*s (%.*s)", static_cast<int>(path_end - base), base, static_cast<int>(tab2 - line), line,
                static_cast<int>(end - function), function);
}

void process_group_text(const char* site, char* out, size_t size) noexcept {
  if (!size) return;
  out[0] = '\0';
  const char* line = std::strstr(site, trace::kProcessGroupLine);
  if (!line || (line != site && line[-1] != '\n')) return;
  const char* name = line + std::strlen(trace::kProcessGroupLine);
  const char* tab = std::strchr(name, '\t');
  if (!tab) return;
  const char* desc = tab + 1;
  const char* end = std::strchr(desc, '\n');
  if (!end) end = desc + std::strlen(desc);
  int desc_length = static_cast<int>(end - desc);
  int name_length = static_cast<int>(tab - name);
  if (!desc_length || std::string_view(desc, static_cast<size_t>(desc_length)) == trace::kUndescribedGroup)
    std::snprintf(out, size, "process group %.*s", name_length, name);
  else
    std::snprintf(out, size, "process group %.*s \"%.*s\"", name_length, name, desc_length, desc);
}

}  // namespace ncclwatch
