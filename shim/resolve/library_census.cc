#include "resolve/library_census.h"

#include "process/process.h"
#include "resolve/elf_image.h"
#include "resolve/resolver.h"
#include "trace/trace.h"

#include <ncclwatch/trace_strings.h>

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace ncclwatch {
namespace {

// Set by the exit hooks when the process attaches (its first NCCL call): libraries are written
// to the trace from then on.
std::atomic<bool> g_process_attached{false};

void announce_libraries_hook() noexcept { announce_libraries(); }
// The resolver says when a library joins (resolver.h cannot depend on this file).
[[maybe_unused]] const bool g_hooked = (set_library_added_hook(announce_libraries_hook), true);

// One object in the process that defines NCCL's API.
struct NcclCopy {
  std::string path;
  const void* base = nullptr;
  int version = 0;              // from NCCL's banner in it (0 unknown; not read for a libnccl)
  bool exported = false;        // in its dynamic symbol table
  bool binds_own_calls = false; // its own calls to NCCL never reach the dynamic linker
  bool named_libnccl = false;   // a libnccl.so* of its own, not NCCL inside another object
};

std::atomic<uint32_t> g_announced{0};   // bit i: library id i is in the trace
std::mutex g_census_mutex;              // guards reported()
// Copies (by load address) already written. Built at first use, never destroyed: the exit
// handler uses it last.
std::vector<const void*>& reported() {
  static auto* list = new std::vector<const void*>();
  return *list;
}

// The symbol that tells an object holds NCCL: every NCCL version has it.
constexpr const char* kMarkerSymbol = "ncclCommInitRank";

std::string main_program_path() {
  char buffer[4096];
  ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : std::string("/proc/self/exe");
}

// Where an object is loaded as dladdr would say (the start of its first segment), computed from
// the program headers: dladdr takes the loader's lock, which must not be taken inside
// dl_iterate_phdr (a dlopen in another thread takes the two locks in the other order).
const void* load_address(const dl_phdr_info& info, ElfW(Addr) page_size) {
  for (int i = 0; i < info.dlpi_phnum; ++i)
    if (info.dlpi_phdr[i].p_type == PT_LOAD)
      return reinterpret_cast<const void*>(info.dlpi_addr + (info.dlpi_phdr[i].p_vaddr & ~(page_size - 1)));
  return reinterpret_cast<const void*>(info.dlpi_addr);
}

struct Scan {
  const void* shim = nullptr;
  ElfW(Addr) page_size = 4096;
  std::vector<NcclCopy> copies;  // every object, with what its dynamic symbols say; files read after
  bool object_skipped = false;   // an object could not be inspected: said after the walk
  bool calls_nccl = false;       // an object other than NCCL's calls NCCL through the dynamic linker
};

constexpr const char* kCensusFailedText =
    "ncclwatch: an internal error cut short the search for NCCL copies ncclwatch cannot trace; one may go "
    "unnamed, its communicators missing from the trace";

// Inside dl_iterate_phdr, with the loader's lock held: memory reads only, no file, no lock of
// ours, nothing that throws out of the callback.
int inspect_object(dl_phdr_info* info, size_t, void* out) noexcept {
  auto& scan = *static_cast<Scan*>(out);
  try {
    const char* name = info->dlpi_name ? info->dlpi_name : "";
    if (std::strstr(name, "linux-vdso") || std::strstr(name, "linux-gate") || info->dlpi_phnum == 0) return 0;
    const void* base = load_address(*info, scan.page_size);
    // It reached NCCL through dlsym: the functions of NCCL's names it has are forwarding stubs.
    if (base == scan.shim || looked_up_nccl_through_dlsym(base)) return 0;
    NcclCopy copy;
    copy.path = name;  // the main program's ("") is read from /proc/self/exe after the walk
    copy.base = base;
    copy.named_libnccl = is_nccl_library_name(name);
    LoadedImage image(*info);
    if (image.defined_address(kMarkerSymbol)) {
      copy.exported = true;
      copy.binds_own_calls = image.binds_symbolically() || !image.relocates_symbols_starting_with("nccl");
    } else if (!copy.named_libnccl && image.relocates_symbols_starting_with("nccl")) {
      scan.calls_nccl = true;
    }
    scan.copies.push_back(std::move(copy));
  } catch (...) {
    scan.object_skipped = true;  // no notice here: the loader's lock is held
  }
  return 0;
}

// After the walk: the files. An object with NCCL's names is a copy of NCCL only if NCCL's own
// code came along (its version banner): stubs that forward to a dlopen'ed NCCL define the names
// too. A libnccl of its own needs no reading: it exports them.
bool confirm_from_file(NcclCopy& copy) {
  if (copy.named_libnccl) return copy.exported;
  ElfFile file(copy.path.empty() ? std::string("/proc/self/exe") : copy.path);
  if (copy.path.empty()) copy.path = main_program_path();
  if (!copy.exported && !file.defines_symbol(kMarkerSymbol)) return false;
  int banner_version = file.nccl_banner_version();
  if (banner_version < 0) return false;
  copy.version = banner_version;
  copy.binds_own_calls |= !copy.exported;
  return true;
}

// Why the calls of an NCCL copy never reach the shim.
std::string why_not_traced(const NcclCopy& copy) {
  if (!copy.exported) return "NCCL is linked into it with hidden symbols: its calls never reach the dynamic linker";
  if (copy.binds_own_calls)
    return "it carries its own NCCL and binds calls to it inside itself (-Bsymbolic or protected symbols)";
  return "it carries its own NCCL, and no call reached that copy through the dynamic linker";
}

void say(const std::string& text) { ncclwatch::say(text.c_str()); }

// The object that the global scope binds ncclCommInitRank to: the shim, unless a library loaded
// ahead of it (a libnccl earlier in LD_PRELOAD) defines NCCL's names and takes the calls.
const void* global_binding_base() {
  void* found = real_dlsym(RTLD_DEFAULT, kMarkerSymbol);
  Dl_info info{};
  if (!found || !dladdr(found, &info)) return nullptr;
  return info.dli_fbase;
}

// This shim's own file, as the fix names it.
std::string shim_file() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<const void*>(&global_binding_base), &info) || !info.dli_fname) return "libncclwatch.so";
  return info.dli_fname;
}

constexpr const char* kAheadOfShimReason =
    "it comes before libncclwatch.so in the load order (LD_PRELOAD), so the program's NCCL calls go "
    "straight to it";

// Every loaded object that defines NCCL's API (the shim aside), files read for hidden copies.
std::vector<NcclCopy> find_nccl_copies(bool* someone_calls_nccl = nullptr) {
  Scan scan;
  scan.shim = shim_load_address();
  scan.page_size = static_cast<ElfW(Addr)>(sysconf(_SC_PAGESIZE));
  dl_iterate_phdr(inspect_object, &scan);
  if (scan.object_skipped) notice_once(Notice::kCensusFailed, kCensusFailedText);
  std::vector<NcclCopy> found;
  for (NcclCopy& copy : scan.copies)
    if (confirm_from_file(copy)) found.push_back(std::move(copy));
  if (someone_calls_nccl) *someone_calls_nccl = scan.calls_nccl;
  return found;
}

}  // namespace

std::string attached_library_strings(const RealNccl& lib) {
  using namespace trace::library_record;
  std::string blob;
  trace::append_string(blob, kId, std::to_string(lib.library_id));
  trace::append_string(blob, kPath, lib.path);
  trace::append_string(blob, kVersion, std::to_string(lib.version));
  trace::append_string(blob, kStatus, kAttached);
  trace::append_string(blob, kReached, lib.reached);
  trace::append_string(blob, kProfilingAliases, lib.has_profiling_aliases ? "1" : "0");
  for (const std::string& name : lib.missing) trace::append_string(blob, kMissing, name);
  return blob;
}

std::string unreached_library_strings(const std::string& path, int version, std::string_view status,
                                      const std::string& reason) {
  using namespace trace::library_record;
  std::string blob;
  trace::append_string(blob, kPath, path);
  trace::append_string(blob, kVersion, std::to_string(version));
  trace::append_string(blob, kStatus, status);
  trace::append_string(blob, kReason, reason);
  return blob;
}

void announce_libraries() noexcept {
  if (!g_process_attached.load(std::memory_order_acquire)) return;
  try {
    for (const RealNccl* lib : known_libraries()) {
      uint32_t bit = 1u << lib->library_id;
      if (g_announced.fetch_or(bit, std::memory_order_relaxed) & bit) continue;
      write_strings_record(trace::RecordType::kLibrary, attached_library_strings(*lib));
    }
  } catch (...) {
    notice_once(Notice::kLibraryRecordFailed,
                "ncclwatch: an internal error kept an NCCL library's record from the trace; reports cannot name "
                "its path or version");
  }
}

void report_untraced_nccl(bool at_exit) noexcept {
  try {
    bool someone_calls_nccl = false;
    std::vector<NcclCopy> copies = find_nccl_copies(&someone_calls_nccl);
    std::vector<const RealNccl*> attached = known_libraries();
    const void* bound_globally = global_binding_base();
    std::lock_guard lock(g_census_mutex);
    for (const NcclCopy& copy : copies) {
      bool is_attached = std::any_of(attached.begin(), attached.end(), [&](const RealNccl* lib) { return lib->base == copy.base; });
      // A libnccl of its own that no call reached yet: unused rather than hidden from us. Said
      // only at exit (it may still be attached before), and only into a trace that exists anyway.
      bool unused_library = copy.named_libnccl && copy.exported;
      // Unless it sits ahead of the shim while the program calls NCCL: then no call ever will.
      bool ahead_of_shim = unused_library && copy.base == bound_globally && someone_calls_nccl;
      if (is_attached || std::find(reported().begin(), reported().end(), copy.base) != reported().end()) continue;
      if (unused_library && !ahead_of_shim && (!at_exit || !g_process_attached.load(std::memory_order_acquire)))
        continue;
      // An unused libnccl is never called: its banner tells its version.
      int version = unused_library ? std::max(ElfFile(copy.path).nccl_banner_version(), 0) : copy.version;
      std::string blob;
      if (ahead_of_shim) {
        blob = unreached_library_strings(copy.path, version, trace::library_record::kNotTraced, kAheadOfShimReason);
        say("ncclwatch: not traced: " + copy.path + ": " + kAheadOfShimReason +
            "; its communicators are missing from the trace. Put the shim first: LD_PRELOAD=" + shim_file() + ":" +
            copy.path + " (ncclwatch run does)");
      } else if (unused_library) {
        blob = unreached_library_strings(copy.path, version, trace::library_record::kUnused,
                                         "no call reached it through ncclwatch");
      } else {
        std::string reason = why_not_traced(copy);
        blob = unreached_library_strings(copy.path, version, trace::library_record::kNotTraced, reason);
        say("ncclwatch: not traced: " + copy.path + ": " + reason +
            "; communicators made through it are missing from the trace");
      }
      write_strings_record(trace::RecordType::kLibrary, blob);
      reported().push_back(copy.base);
    }
  } catch (...) {
    notice_once(Notice::kCensusFailed, kCensusFailedText);
  }
}

void report_nccl_ahead_of_shim_at_load() noexcept {
  // One lookup for every process: only where another library takes NCCL's names does the census
  // run (a program that calls NCCL itself hears it now; one that loads NCCL later, at exit).
  const void* bound = global_binding_base();
  if (bound && bound != shim_load_address() && config().record) report_untraced_nccl(false);
}

void library_census_process_attached() noexcept {
  g_process_attached.store(true, std::memory_order_release);
  announce_libraries();
}

void library_census_after_fork_in_child() noexcept {
  g_process_attached.store(false, std::memory_order_relaxed);
  g_announced.store(0, std::memory_order_relaxed);
  new (&g_census_mutex) std::mutex();
  reported().clear();
}

}  // namespace ncclwatch
