#include "model/symbolizer.h"

#include <ncclwatch/demangle.h>

#include <cxxabi.h>
#include <elf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <string>
#include <vector>

namespace ncclwatch::model {
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

std::string dir_name(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// A trace names module files by path, and a hostile or damaged one can name anything: a FIFO
// (opening it would block forever), a device, a directory, /etc/shadow. So a file is opened without
// blocking and used only when it is a regular file that starts with the ELF magic; libdw gets the
// descriptor, never a path to open itself. Returns -1 for anything else.
int open_elf_file(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return -1;
  struct stat st{};
  unsigned char magic[SELFMAG];
  bool elf = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && pread(fd, magic, SELFMAG, 0) == SELFMAG &&
             std::memcmp(magic, ELFMAG, SELFMAG) == 0;
  if (!elf) {
    close(fd);
    return -1;
  }
  return fd;
}

// Every module comes with its descriptor (dwfl_report_elf): libdw must not look for one by path.
int no_elf_by_path(Dwfl_Module*, void**, const char*, Dwarf_Addr, char**, Elf**) { return -1; }

// Separate debug information, where libdw's standard finder would look (the build-id tree, then the
// .gnu_debuglink name beside the module, in its .debug/ and under /usr/lib/debug), but opened
// through open_elf_file: the finder's own open blocks on a FIFO of that name.
int find_debuginfo_safely(Dwfl_Module* mod, void**, const char*, Dwarf_Addr, const char* file_name,
                          const char* debuglink_file, GElf_Word, char** debuginfo_file_name) {
  std::vector<std::string> candidates;
  const unsigned char* id = nullptr;
  GElf_Addr id_vaddr = 0;
  int id_len = dwfl_module_build_id(mod, &id, &id_vaddr);
  if (id_len > 1) {
    std::string hex;
    for (int i = 0; i < id_len; ++i) hex += fmt::format("{:02x}", id[i]);
    candidates.push_back("/usr/lib/debug/.build-id/" + hex.substr(0, 2) + "/" + hex.substr(2) + ".debug");
  }
  if (file_name && debuglink_file && !std::strchr(debuglink_file, '/')) {
    std::string dir = dir_name(file_name);
    candidates.push_back(dir + "/" + debuglink_file);
    candidates.push_back(dir + "/.debug/" + debuglink_file);
    candidates.push_back("/usr/lib/debug" + (dir[0] == '/' ? dir : "/" + dir) + "/" + debuglink_file);
  }
  for (const std::string& path : candidates) {
    if (file_name && path == file_name) continue;  // the module itself has no debug information
    int fd = open_elf_file(path);
    if (fd < 0) continue;
    *debuginfo_file_name = strdup(path.c_str());
    return fd;  // libdw owns it now
  }
  return -1;
}

const Dwfl_Callbacks kOfflineCallbacks = {
    .find_elf = no_elf_by_path,
    .find_debuginfo = find_debuginfo_safely,
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
    std::map<std::string, bool> reported;  // path -> usable (the build the process loaded)
  };
  std::set<std::string> other_builds;
  std::map<const ProcessTrace*, Session> sessions;
  std::map<std::pair<const ProcessTrace*, uint64_t>, Frame> cache;

  ~Impl() {
    for (auto& [_, s] : sessions)
      if (s.dwfl) dwfl_end(s.dwfl);
  }
};

Symbolizer::Symbolizer() : impl_(std::make_unique<Impl>()) {}
Symbolizer::~Symbolizer() = default;
const std::set<std::string>& Symbolizer::other_builds() const { return impl_->other_builds; }

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
      bool usable = false;
      int fd = open_elf_file(module->path);
      if (fd >= 0) {
        dwfl_report_begin_add(session.dwfl);
        // dwfl takes ownership of fd on success.
        Dwfl_Module* mod = dwfl_report_elf(session.dwfl, frame.module.c_str(), module->path.c_str(), fd, module->base, false);
        if (!mod) close(fd);
        dwfl_report_end(session.dwfl, nullptr, nullptr);
        usable = mod != nullptr;
        // The file at that path on this machine may be another build (another host, an update
        // since): its symbols would name the wrong functions. The trace's build ID decides.
        const unsigned char* id = nullptr;
        GElf_Addr id_vaddr = 0;
        int id_len = mod ? dwfl_module_build_id(mod, &id, &id_vaddr) : 0;
        if (usable && !module->build_id.empty() &&
            (id_len <= 0 || module->build_id != std::string(reinterpret_cast<const char*>(id), static_cast<size_t>(id_len)))) {
          usable = false;
          impl_->other_builds.insert(module->path);
        }
      }
      session.reported[module->path] = usable;
    }
    if (session.dwfl && session.reported[module->path]) {
      // A return address points after the call instruction: look up the byte before it.
      Dwarf_Addr pc = address - 1;
      if (Dwfl_Module* mod = dwfl_addrmodule(session.dwfl, pc)) {
        // Symbol and file names come from files on disk: bytes, like everything else reports show.
        if (const char* name = dwfl_module_addrname(mod, pc)) frame.function = valid_utf8(demangle_short(name));
        if (Dwfl_Line* line = dwfl_module_getsrc(mod, pc)) {
          int lineno = 0;
          if (const char* file = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr)) {
            frame.file = valid_utf8(file);
            frame.line = lineno;
          }
        }
      }
    }
  }
  impl_->cache.emplace(key, frame);
  return frame;
}

}  // namespace ncclwatch::model
