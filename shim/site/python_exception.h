// The Python exception a program dies of, for the trace's ending record (trace_strings.h
// ending_record): its type, message and the line that raised it.
//
// How, without ever taking the GIL ourselves: Py_AddPendingCall (callable from any thread, no
// GIL) asks the interpreter to run a callback on its main thread, GIL held; that callback
// registers another with Python's atexit, which runs after the interpreter printed the traceback
// of an exception nobody caught and before it tears itself down, and reads sys.last_exc
// (sys.last_value before 3.12) through the C API. Nothing caught, or anything unreadable: no record,
// the exit status alone tells.
#pragma once

namespace ncclwatch {

// Once per process image, when Python is running in it (a program without Python: nothing).
void watch_for_python_exception() noexcept;
// The exception's one-line summary for the exit alert ("RuntimeError: boom (train.py:12)"), "" if none.
const char* python_exception_summary() noexcept;
void python_exception_after_fork_in_child() noexcept;

}  // namespace ncclwatch
