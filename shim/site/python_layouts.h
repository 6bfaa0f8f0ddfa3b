// Where CPython keeps a thread's Python stack, per minor version, for 64-bit builds with the GIL.
// The offsets come from each version's own headers (Include/cpython/pystate.h, frameobject.h,
// internal/pycore_frame.h, code.h, unicodeobject.h); tests/unit/python_layouts_test.py compiles a
// probe against every installed version's headers and compares. A version not listed here gets
// no Python site (said once), never a guess.
#pragma once

#include <cstdint>
#include <optional>

namespace ncclwatch::python {

// PyThreadState starts with `prev` and `next` (the interpreter's list of threads) in 3.9 to 3.13.
inline constexpr uint32_t kThreadStateNext = 8;

struct Layout {
  int minor = 0;                 // 3.<minor>
  // The thread's innermost frame: *(tstate + thread_frame), then, when cframe_current_frame >= 0
  // (3.11 and 3.12 go through a _PyCFrame), *(that + cframe_current_frame).
  uint32_t thread_frame = 0;
  int32_t cframe_current_frame = -1;
  // 3.9/3.10 walk PyFrameObjects (a Python object, type-checked); 3.11+ _PyInterpreterFrames.
  bool frame_objects = false;
  uint32_t frame_size = 0;       // bytes read per frame
  uint32_t frame_previous = 0;   // f_back / previous
  uint32_t frame_code = 0;       // f_code / f_executable
  // The last instruction: 3.9 f_lasti in bytes, 3.10 f_lasti in code units (ints); 3.11+
  // prev_instr / instr_ptr, a pointer into the code object at code_instructions.
  uint32_t frame_instruction = 0;
  bool lasti_in_code_units = false;
  int32_t frame_owner = -1;      // owner byte, where C-stack entry frames must be skipped (-1: none)
  uint8_t owner_cstack = 0;      // FRAME_OWNED_BY_CSTACK
  uint32_t code_instructions = 0;  // co_code_adaptive (3.11+), else 0
  uint32_t code_filename = 0;
  uint32_t code_name = 0;        // co_qualname where it exists, else co_name
  uint32_t code_first_line = 0;  // co_firstlineno (int)
  // A frame's local variables: the array at frame + frame_locals (f_localsplus / localsplus),
  // named by the tuple at code + code_local_names (co_varnames / co_localsplusnames), index for
  // index.
  uint32_t frame_locals = 0;
  uint32_t code_local_names = 0;
  uint32_t code_size = 0;        // bytes read per code object (covers every field above)
  uint32_t ascii_header = 0;     // sizeof(PyASCIIObject): where a compact ASCII string's bytes start
  uint32_t compact_header = 0;   // sizeof(PyCompactUnicodeObject): ... a compact non-ASCII one's
};

// PyObject and PyASCIIObject fields that are the same in every version listed.
inline constexpr uint32_t kObjectType = 8;      // ob_type
inline constexpr uint32_t kStringLength = 16;   // PyASCIIObject.length
inline constexpr uint32_t kStringState = 32;    // its state bit field
inline constexpr uint32_t kTupleSize = 16;      // PyVarObject.ob_size
inline constexpr uint32_t kTupleItems = 24;     // PyTupleObject.ob_item
// state bits: interned:2, kind:3, compact:1, ascii:1 (3.9-3.13).
inline constexpr uint32_t kStateKindShift = 2, kStateKindMask = 7, kStateCompact = 1u << 5, kStateAscii = 1u << 6;

inline constexpr Layout kLayouts[] = {
    // 3.9: PyThreadState.frame -> PyFrameObject {f_back, f_code, ..., f_lasti (bytes)}
    {.minor = 9, .thread_frame = 24, .frame_objects = true, .frame_size = 112, .frame_previous = 24,
     .frame_code = 32, .frame_instruction = 104, .code_filename = 104, .code_name = 112, .code_first_line = 40,
     .frame_locals = 360, .code_local_names = 72, .code_size = 120, .ascii_header = 48, .compact_header = 72},
    // 3.10: the same walk; f_lasti counts 2-byte code units.
    {.minor = 10, .thread_frame = 24, .frame_objects = true, .frame_size = 104, .frame_previous = 24,
     .frame_code = 32, .frame_instruction = 96, .lasti_in_code_units = true, .code_filename = 104,
     .code_name = 112, .code_first_line = 40, .frame_locals = 352, .code_local_names = 72, .code_size = 120,
     .ascii_header = 48, .compact_header = 72},
    // 3.11: PyThreadState.cframe -> _PyCFrame.current_frame -> _PyInterpreterFrame
    {.minor = 11, .thread_frame = 56, .cframe_current_frame = 8, .frame_size = 80, .frame_previous = 48,
     .frame_code = 32, .frame_instruction = 56, .code_instructions = 184, .code_filename = 112,
     .code_name = 128, .code_first_line = 72, .frame_locals = 72, .code_local_names = 96, .code_size = 136,
     .ascii_header = 48, .compact_header = 72},
    // 3.12: entry frames owned by the C stack are shims, not Python code.
    {.minor = 12, .thread_frame = 56, .cframe_current_frame = 0, .frame_size = 80, .frame_previous = 8,
     .frame_code = 0, .frame_instruction = 56, .frame_owner = 70, .owner_cstack = 3, .code_instructions = 192,
     .code_filename = 112, .code_name = 128, .code_first_line = 68, .frame_locals = 72, .code_local_names = 96,
     .code_size = 136, .ascii_header = 40, .compact_header = 56},
    // 3.13: PyThreadState.current_frame; f_executable is the code object of Python frames.
    {.minor = 13, .thread_frame = 72, .frame_size = 80, .frame_previous = 8, .frame_code = 0,
     .frame_instruction = 56, .frame_owner = 70, .owner_cstack = 3, .code_instructions = 200,
     .code_filename = 112, .code_name = 128, .code_first_line = 68, .frame_locals = 72, .code_local_names = 96,
     .code_size = 136, .ascii_header = 40, .compact_header = 56},
};

// The reader copies frame_size and code_size bytes into buffers of these sizes; each field it
// reads must lie inside.
inline constexpr uint32_t kMaxFrameBytes = 128, kMaxCodeBytes = 160, kMaxStringHeader = 80;
constexpr bool fits(const Layout& l) {
  return l.frame_size <= kMaxFrameBytes && l.frame_previous + 8 <= l.frame_size && l.frame_code + 8 <= l.frame_size &&
         l.frame_instruction + 8 <= l.frame_size && (l.frame_owner < 0 || uint32_t(l.frame_owner) < l.frame_size) &&
         kObjectType + 8 <= l.frame_size && l.code_size <= kMaxCodeBytes && l.code_filename + 8 <= l.code_size &&
         l.code_name + 8 <= l.code_size && l.code_first_line + 4 <= l.code_size && kObjectType + 8 <= l.code_size &&
         l.code_local_names + 8 <= l.code_size &&
         l.ascii_header <= kMaxStringHeader && kStringState + 4 <= l.ascii_header && l.compact_header <= kMaxStringHeader;
}
static_assert([] {
  for (const Layout& l : kLayouts)
    if (!fits(l)) return false;
  return true;
}());

inline std::optional<Layout> layout_for(int major, int minor) {
  if (major != 3) return std::nullopt;
  for (const Layout& layout : kLayouts)
    if (layout.minor == minor) return layout;
  return std::nullopt;
}

}  // namespace ncclwatch::python
