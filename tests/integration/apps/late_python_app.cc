// A native program that makes a communicator, then loads and starts Python (as an application
// embedding an interpreter does) and makes another from Python code through ctypes:
//   late_python_app LIBPYTHON
// The first has no Python line (no interpreter yet); the second has the embedded code's.
#include <nccl.h>

#include <dlfcn.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  ncclUniqueId id;
  ncclComm_t native = nullptr;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&native, 1, id, 0) != ncclSuccess) return 3;
  void* python = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (!python) {
    std::fprintf(stderr, "late_python_app: %s\n", dlerror());
    return 4;
  }
  auto initialize = reinterpret_cast<void (*)()>(dlsym(python, "Py_Initialize"));
  auto run = reinterpret_cast<int (*)(const char*)>(dlsym(python, "PyRun_SimpleString"));
  if (!initialize || !run) return 5;
  initialize();
  int failed = run(
      "import ctypes\n"
      "nccl = ctypes.CDLL('libnccl.so.2')\n"
      "UniqueId = type('UniqueId', (ctypes.Structure,), {'_fields_': [('internal', ctypes.c_byte * 128)]})\n"
      "uid = UniqueId()\n"
      "assert nccl.ncclGetUniqueId(ctypes.byref(uid)) == 0\n"
      "comm = ctypes.c_void_p()\n"
      "assert nccl.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0) == 0  # the embedded line 7\n");
  std::printf("late_python_app: done\n");
  return failed ? 6 : 0;  // both communicators leaked on purpose
}
