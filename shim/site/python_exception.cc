#include "site/python_exception.h"

#include "process/process.h"
#include "resolve/resolve.h"
#include "trace/trace.h"

#include <ncclwatch/trace_strings.h>

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <string>

namespace ncclwatch {
namespace {

// The C API functions the callbacks use, found by name in the running interpreter (every one has
// been in CPython's API since 3.x began, PySys_GetObject's "last_exc" aside: 3.12).
struct PyApi {
  using Object = void*;
  struct MethodDef {
    const char* name;
    Object (*method)(Object self, Object unused);
    int flags;
    const char* doc;
  };
  static constexpr int kMethNoArgs = 0x0004;

  int (*is_initialized)() = nullptr;
  int (*add_pending_call)(int (*)(void*), void*) = nullptr;
  Object (*import_module)(const char*) = nullptr;
  Object (*get_attr)(Object, const char*) = nullptr;
  Object (*call_one)(Object callable, Object arg, ...) = nullptr;  // PyObject_CallFunctionObjArgs
  Object (*new_function)(MethodDef*, Object) = nullptr;            // PyCFunction_New
  Object (*sys_object)(const char*) = nullptr;                      // borrowed
  Object (*str)(Object) = nullptr;
  const char* (*utf8)(Object) = nullptr;
  long (*as_long)(Object) = nullptr;
  void (*clear_error)() = nullptr;
  void (*incref)(Object) = nullptr;
  void (*decref)(Object) = nullptr;
  Object none = nullptr;

  template <class Fn> static void find(Fn& fn, const char* name) { fn = reinterpret_cast<Fn>(real_dlsym(RTLD_DEFAULT, name)); }
  bool resolve() {
    find(is_initialized, "Py_IsInitialized");
    find(add_pending_call, "Py_AddPendingCall");
    find(import_module, "PyImport_ImportModule");
    find(get_attr, "PyObject_GetAttrString");
    find(call_one, "PyObject_CallFunctionObjArgs");
    find(new_function, "PyCFunction_New");
    find(sys_object, "PySys_GetObject");
    find(str, "PyObject_Str");
    find(utf8, "PyUnicode_AsUTF8");
    find(as_long, "PyLong_AsLong");
    find(clear_error, "PyErr_Clear");
    find(incref, "Py_IncRef");
    find(decref, "Py_DecRef");
    none = real_dlsym(RTLD_DEFAULT, "_Py_NoneStruct");
    return is_initialized && add_pending_call && import_module && get_attr && call_one && new_function && sys_object &&
           str && utf8 && as_long && clear_error && incref && decref && none;
  }

  // A new reference's owner: released at scope end. Null (an error) clears the error.
  class Ref {
   public:
    Ref(const PyApi& py, Object o) : py_(py), o_(o) {
      if (!o_) py_.clear_error();
    }
    ~Ref() {
      if (o_) py_.decref(o_);
    }
    Ref(const Ref&) = delete;
    Ref& operator=(const Ref&) = delete;
    Object get() const { return o_; }
    explicit operator bool() const { return o_ && o_ != py_.none; }
    Ref attr(const char* name) const { return Ref(py_, o_ ? py_.get_attr(o_, name) : nullptr); }
    // Its str() as UTF-8, "" when that fails.
    std::string text() const {
      if (!*this) return {};
      Ref s(py_, py_.str(o_));
      const char* chars = s.get() ? py_.utf8(s.get()) : nullptr;
      if (!chars) py_.clear_error();
      return chars ? chars : "";
    }

   private:
    const PyApi& py_;
    Object o_;
  };
};

PyApi g_py;                       // resolved once, before any callback is asked for
std::atomic<bool> g_watching{false};
std::atomic<bool> g_read{false};  // the exception was read (once per image)
char g_summary[640] = {};         // for the exit alert

constexpr size_t kMaxMessageBytes = 512;

// Runs in Python's atexit, GIL held: the uncaught exception, if any, into the ending record.
PyApi::Object read_exception(PyApi::Object, PyApi::Object) {
  const PyApi& py = g_py;
  py.incref(py.none);
  if (g_read.exchange(true)) return py.none;
  PyApi::Object exc = py.sys_object("last_exc");  // borrowed; 3.12 on
  if (!exc || exc == py.none) exc = py.sys_object("last_value");
  if (!exc || exc == py.none) return py.none;
  py.incref(exc);
  PyApi::Ref error(py, exc);
  std::string type = error.attr("__class__").attr("__qualname__").text();
  std::string message = capped_value(error.text(), kMaxMessageBytes);
  // The innermost frame of its traceback: where it was raised.
  std::string file, function, line;
  PyApi::Ref tb = error.attr("__traceback__");
  PyApi::Object innermost = tb.get();
  if (innermost) py.incref(innermost);
  for (int depth = 0; innermost && innermost != py.none && depth < 4096; ++depth) {
    PyApi::Object next = py.get_attr(innermost, "tb_next");
    if (!next) py.clear_error();
    if (!next || next == py.none) {
      if (next) py.decref(next);
      break;
    }
    py.decref(innermost);
    innermost = next;
  }
  if (innermost && innermost != py.none) {
    PyApi::Ref last(py, innermost);
    innermost = nullptr;
    line = last.attr("tb_lineno").text();
    PyApi::Ref code = last.attr("tb_frame").attr("f_code");
    file = capped_value(code.attr("co_filename").text(), 1024);
    function = capped_value(code.attr("co_name").text(), 256);
  } else if (innermost) {
    py.decref(innermost);
  }
  if (type.empty()) return py.none;
  std::string blob;
  trace::append_string(blob, trace::ending_record::kExceptionType, capped_value(type, 256));
  trace::append_string(blob, trace::ending_record::kExceptionMessage, message);
  if (!file.empty()) {
    trace::append_string(blob, trace::ending_record::kExceptionFile, file);
    trace::append_string(blob, trace::ending_record::kExceptionLine, line);
    trace::append_string(blob, trace::ending_record::kExceptionFunction, function);
  }
  write_strings_record(trace::RecordType::kEnding, blob);
  const char* base = file.c_str();
  for (const char* c = base; *c; ++c)
    if (*c == '/') base = c + 1;
  std::snprintf(g_summary, sizeof(g_summary), file.empty() ? "%s: %.200s" : "%s: %.200s (%s:%s)", type.c_str(),
                message.c_str(), base, line.c_str());
  return py.none;
}

PyApi::MethodDef g_reader{"ncclwatch_read_exception", read_exception, PyApi::kMethNoArgs, nullptr};

// Runs on Python's main thread at a pending-call check, GIL held: atexit.register(reader).
int register_reader(void*) {
  const PyApi& py = g_py;
  PyApi::Ref atexit(py, py.import_module("atexit"));
  PyApi::Ref reg = atexit.attr("register");
  PyApi::Ref reader(py, py.new_function(&g_reader, nullptr));
  if (reg && reader) PyApi::Ref done(py, py.call_one(reg.get(), reader.get(), nullptr));
  return 0;  // never an error of ours raised into the program
}

}  // namespace

void watch_for_python_exception() noexcept {
  if (g_watching.exchange(true)) return;
  try {
    if (!g_py.resolve() || !g_py.is_initialized()) return;
    if (g_py.add_pending_call(register_reader, nullptr) != 0)
      notice_once(Notice::kPythonSiteUnavailable, "ncclwatch: a Python exception that ends the program is not recorded "
                                                  "(Python's pending-call queue is full)");
  } catch (...) {
  }
}

const char* python_exception_summary() noexcept { return g_summary; }

// A forked child keeps the registration (Python's atexit crosses fork) and reads its own ending.
void python_exception_after_fork_in_child() noexcept {
  g_read.store(false);
  g_summary[0] = '\0';
}

}  // namespace ncclwatch
