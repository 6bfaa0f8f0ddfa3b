/* Prints, from a CPython version's own headers, the offsets ncclwatch's Python site reader
   keeps in shim/site/python_layouts.h (python_layouts_test.py compares the two). */
#define Py_BUILD_CORE 1
#include <Python.h>
#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h>
#else
#include <internal/pycore_frame.h>
#endif
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define SHOW(name, value) printf("%s %ld\n", name, (long)(value))

/* The state word of a str with only `set` applied to its bit fields. */
#define STATE_WITH(set)                    \
  ({                                       \
    PyASCIIObject o;                       \
    memset(&o, 0, sizeof o);               \
    o.state.set;                           \
    unsigned int word;                     \
    memcpy(&word, &o.state, sizeof word);  \
    word;                                  \
  })

int main(void) {
  printf("minor %d\n", PY_MINOR_VERSION);
  SHOW("thread_next", offsetof(PyThreadState, next));
#if PY_VERSION_HEX < 0x030B0000
  SHOW("thread_frame", offsetof(PyThreadState, frame));
  SHOW("cframe_current_frame", -1);
  SHOW("frame_objects", 1);
  SHOW("frame_previous", offsetof(PyFrameObject, f_back));
  SHOW("frame_code", offsetof(PyFrameObject, f_code));
  SHOW("frame_instruction", offsetof(PyFrameObject, f_lasti));
  SHOW("frame_owner", -1);
  SHOW("code_instructions", 0);
  SHOW("code_name", offsetof(PyCodeObject, co_name));
#else
#if PY_VERSION_HEX < 0x030D0000
  SHOW("thread_frame", offsetof(PyThreadState, cframe));
  SHOW("cframe_current_frame", offsetof(_PyCFrame, current_frame));
  SHOW("frame_code", offsetof(_PyInterpreterFrame, f_code));
  SHOW("frame_instruction", offsetof(_PyInterpreterFrame, prev_instr));
#else
  SHOW("thread_frame", offsetof(PyThreadState, current_frame));
  SHOW("cframe_current_frame", -1);
  SHOW("frame_code", offsetof(_PyInterpreterFrame, f_executable));
  SHOW("frame_instruction", offsetof(_PyInterpreterFrame, instr_ptr));
#endif
  SHOW("frame_objects", 0);
  SHOW("frame_previous", offsetof(_PyInterpreterFrame, previous));
#if PY_VERSION_HEX >= 0x030C0000
  SHOW("frame_owner", offsetof(_PyInterpreterFrame, owner));
  SHOW("owner_cstack", FRAME_OWNED_BY_CSTACK);
#else
  SHOW("frame_owner", -1);
#endif
  SHOW("code_instructions", offsetof(PyCodeObject, co_code_adaptive));
  SHOW("code_name", offsetof(PyCodeObject, co_qualname));
#endif
#if PY_VERSION_HEX < 0x030B0000
  SHOW("frame_locals", offsetof(PyFrameObject, f_localsplus));
  SHOW("code_local_names", offsetof(PyCodeObject, co_varnames));
#else
  SHOW("frame_locals", offsetof(_PyInterpreterFrame, localsplus));
  SHOW("code_local_names", offsetof(PyCodeObject, co_localsplusnames));
#endif
  SHOW("tuple_size", offsetof(PyVarObject, ob_size));
  SHOW("tuple_items", offsetof(PyTupleObject, ob_item));
  SHOW("code_filename", offsetof(PyCodeObject, co_filename));
  SHOW("code_first_line", offsetof(PyCodeObject, co_firstlineno));
  SHOW("ascii_header", sizeof(PyASCIIObject));
  SHOW("compact_header", sizeof(PyCompactUnicodeObject));
  SHOW("object_type", offsetof(PyObject, ob_type));
  SHOW("string_length", offsetof(PyASCIIObject, length));
  SHOW("string_state", offsetof(PyASCIIObject, state));
  SHOW("state_kind_7", STATE_WITH(kind = 7));
  SHOW("state_compact", STATE_WITH(compact = 1));
  SHOW("state_ascii", STATE_WITH(ascii = 1));
  return 0;
}
