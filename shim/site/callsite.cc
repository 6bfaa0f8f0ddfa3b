#include "site/callsite.h"

#include "process/process.h"
#include "resolve/resolve.h"
#include "site/python_site.h"
#include "trace/trace.h"

#include <ncclwatch/demangle.h>

#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <execinfo.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace ncclwatch {
namespace {

SpinLock g_modules_lock;
std::vector<uint64_t>* g_seen_bases = nullptr;  // modules already described in the trace

// The GNU build ID of the object loaded at `base`, read from its notes in memory; 0 bytes when it
// has none (or is not found).
struct BuildId {
  const unsigned char* bytes = nullptr;
  size_t len = 0;
};

BuildId build_id_of(uint64_t base) {
  struct Search {
    uint64_t base;
    BuildId found;
  } search{base, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto& s = *static_cast<Search*>(data);
        // dladdr's base is where the object's first loaded segment starts.
        uint64_t first = ~0ull;
        for (int i = 0; i < info->dlpi_phnum; ++i)
          if (info->dlpi_phdr[i].p_type == PT_LOAD) first = std::min<uint64_t>(first, info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        if ((first & ~uint64_t{0xfff}) != (s.base & ~uint64_t{0xfff})) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_NOTE) continue;
          auto* at = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
          const unsigned char* end = at + ph.p_memsz;
          while (at + sizeof(ElfW(Nhdr)) <= end) {
            auto* note = reinterpret_cast<const ElfW(Nhdr)*>(at);
            const unsigned char* name = at + sizeof(ElfW(Nhdr));
            const unsigned char* desc = name + ((note->n_namesz + 3) & ~3u);
            if (desc + note->n_descsz > end) break;
            if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0 &&
                note->n_descsz <= trace::kMaxBuildIdBytes) {
              s.found = {desc, note->n_descsz};
              return 1;
            }
            at = desc + ((note->n_descsz + 3) & ~3u);
          }
        }
        return 1;  // the object at `base`, without a build ID
      },
      &search);
  return search.found;
}

void write_module_record(uint64_t base, const char* path) {
  size_t len = std::strlen(path);
  BuildId id = build_id_of(base);
  RecordSlot slot = reserve_record(trace::padded_size(sizeof(trace::ModuleRecord) + len + id.len));
  if (!slot) return;
  auto* rec = slot.as<trace::ModuleRecord>();
  rec->base = base;
  rec->path_len = static_cast<uint32_t>(len);
  rec->build_id_len = static_cast<uint8_t>(id.len);
  std::memcpy(slot.bytes() + sizeof(trace::ModuleRecord), path, len);
  if (id.len) std::memcpy(slot.bytes() + sizeof(trace::ModuleRecord) + len, id.bytes, id.len);
  slot.commit(trace::RecordType::kModule);
}

void note_module(const Dl_info& info) {
  if (!info.dli_fbase || !info.dli_fname) return;
  uint64_t base = reinterpret_cast<uint64_t>(info.dli_fbase);
  {
    std::lock_guard lock(g_modules_lock);
    if (!g_seen_bases) g_seen_bases = new std::vector<uint64_t>();
    for (uint64_t seen : *g_seen_bases)
      if (seen == base) return;
    g_seen_bases->push_back(base);
  }
  write_module_record(base, info.dli_fname[0] ? info.dli_fname : "/proc/self/exe");
}

const char* base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

// "function (module)" with the C++ parameter list dropped: short enough for one alert line.
void summarize(const Dl_info& info, uint64_t address, char* out, size_t size) {
  const char* module = info.dli_fname && info.dli_fname[0] ? base_name(info.dli_fname) : "main program";
  if (!info.dli_sname) {
    std::snprintf(out, size, "0x%llx (%s+0x%llx)", static_cast<unsigned long long>(address), module,
                  static_cast<unsigned long long>(address - reinterpret_cast<uint64_t>(info.dli_fbase)));
    return;
  }
  int status = 0;
  char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
  std::string name = (status == 0 && demangled) ? demangled : info.dli_sname;
  std::free(demangled);
  name = drop_parameters(std::move(name));
  std::snprintf(out, size, "%s (%s)", name.c_str(), module);
}

}  // namespace

void capture_call_site(CallSite& site, int max_frames, bool python) noexcept {
  try {
    // Room for our own wrapper frames and a sanitizer's interceptor below them.
    constexpr int kFramesBelowCaller = 8;
    void* raw[CallSite::kMaxFrames + kFramesBelowCaller];
    int depth = backtrace(raw, std::clamp(max_frames, 0, CallSite::kMaxFrames) + kFramesBelowCaller);
    // Frames before our own belong to backtrace's implementation (a sanitizer's interceptor).
    int first = 0;
    while (first < depth && !is_inside_shim(raw[first])) ++first;
    if (first == depth) first = 0;
    site.nframes = 0;
    // The summary names the caller. Libraries such as libtorch_cuda.so hide most internal
    // functions, so when the first frame has no symbol, a few frames up in the same module
    // may; else the first frame stays as module+offset (the analyzers symbolize it offline).
    constexpr int kSummaryLookahead = 8;
    bool summarized = false;
    const void* caller_module = nullptr;
    for (int i = first; i < depth && site.nframes < max_frames && site.nframes < CallSite::kMaxFrames; ++i) {
      Dl_info info{};
      bool known = dladdr(raw[i], &info) != 0;
      if (known && is_inside_shim(raw[i])) continue;  // our own wrapper frames
      uint64_t address = reinterpret_cast<uint64_t>(raw[i]);
      site.frames[site.nframes++] = address;
      if (!known) continue;
      note_module(info);
      if (info.dli_fname && std::strstr(base_name(info.dli_fname), "torch")) site.in_torch = true;
      if (site.nframes == 1) {
        caller_module = info.dli_fbase;
        site.by_nvshmem = info.dli_fname && std::strstr(base_name(info.dli_fname), "nvshmem");
        // A return address points after the call; -1 lands inside the calling instruction.
        summarize(info, address - 1, site.summary, sizeof(site.summary));
      }
      if (!summarized && site.nframes <= kSummaryLookahead && info.dli_sname && info.dli_fbase == caller_module) {
        Dl_info exact{};
        if (dladdr(reinterpret_cast<void*>(address - 1), &exact) && exact.dli_sname) {
          summarize(exact, address - 1, site.summary, sizeof(site.summary));
          summarized = true;
        }
      }
    }
  } catch (...) {
    notice_once(Notice::kCallSiteFailed,
                "ncclwatch: an internal error cut a call site short; some call sites in the trace and the exit "
                "alert are incomplete");
  }
  if (python) capture_python_site(site.python, sizeof(site.python));
}

void describe_modules_of(const uint64_t* addresses, int n) noexcept {
  try {
    for (int i = 0; i < n; ++i) {
      Dl_info info{};
      if (dladdr(reinterpret_cast<void*>(addresses[i]), &info)) note_module(info);
    }
  } catch (...) {
    notice_once(Notice::kCallSiteFailed, "ncclwatch: an internal error while naming the modules of a native stack");
  }
}

void callsite_after_fork_in_child() noexcept {
  g_modules_lock.reset();
  g_seen_bases = nullptr;  // the child writes a new file, so it describes modules again
  python_site_after_fork_in_child();
}

}  // namespace ncclwatch
