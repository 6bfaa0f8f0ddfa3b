#include "symbolizer.h"

#include <ncclwatch/demangle.h>

#include <cxxabi.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fmt/format.h>

namespace ncclwatch::report {
namespace {

std::string base_name(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string demangle_short(const char* name) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = (status == 0 && demangled) ? demangled : name;
  std::free(demangled);
  out = drop_parameters(std::move(out));
  return out;
}

const Dwfl_Callbacks kOfflineCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = nullptr,
};

}  // namespace

std::string Frame::describe() const {
  std::string out;
  if (!function.empty()) out = function;
  else out = fmt::format("{}+0x{:x}", module.empty() ? "?" : module, offset);
  if (!file.empty()) out += fmt::format(" at {}:{}", file, line);
  if (!function.empty() && !module.empty()) out += " (" + module + ")";
  return out;
}

// One libdw session per process trace, each module reported at the base it was loaded at, so
// recorded addresses look up directly.
struct Symbolizer::Impl {
  struct Session {
    Dwfl* dwfl = nullptr;
    std::map<std::string, bool> reported;
  };
  std::map<const ProcessTrace*, Session> sessions;
  std::map<std::pair<const ProcessTrace*, uint64_t>, Frame> cache;

  ~Impl() {
    for (auto& [_, s] : sessions)
      if (s.dwfl) dwfl_end(s.dwfl);
  }
};

Symbolizer::Symbolizer() : impl_(std::make_unique<Impl>()) {}
Symbolizer::~Symbolizer() = default;

Frame Symbolizer::resolve(const ProcessTrace& process, uint64_t address) {
  auto key = std::make_pair(&process, address);
  if (auto it = impl_->cache.find(key); it != impl_->cache.end()) return it->second;

  Frame frame;
  frame.address = address;
  const Module* module = nullptr;
  for (const Module& m : process.modules)
    if (m.base <= address && (!module || m.base > module->base)) module = &m;
  if (module) {
    frame.module = base_name(module->path);
    frame.offset = address - module->base;
    auto& session = impl_->sessions[&process];
    if (!session.dwfl) {
      session.dwfl = dwfl_begin(&kOfflineCallbacks);
    }
    if (session.dwfl && !session.reported.count(module->path)) {
      session.reported[module->path] = true;
      dwfl_report_begin_add(session.dwfl);
      int fd = open(module->path.c_str(), O_RDONLY | O_CLOEXEC);
      // dwfl takes ownership of fd on success.
      if (fd >= 0 && !dwfl_report_elf(session.dwfl, frame.module.c_str(), module->path.c_str(), fd, module->base, false))
        close(fd);
      dwfl_report_end(session.dwfl, nullptr, nullptr);
    }
    if (session.dwfl) {
      // A return address points after the call instruction: look up the byte before it.
      Dwarf_Addr pc = address - 1;
      if (Dwfl_Module* mod = dwfl_addrmodule(session.dwfl, pc)) {
        if (const char* name = dwfl_module_addrname(mod, pc)) frame.function = demangle_short(name);
        if (Dwfl_Line* line = dwfl_module_getsrc(mod, pc)) {
          int lineno = 0;
          if (const char* file = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr)) {
            frame.file = file;
            frame.line = lineno;
          }
        }
      }
    }
  }
  impl_->cache.emplace(key, frame);
  return frame;
}

}  // namespace ncclwatch::report
