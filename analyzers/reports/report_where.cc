// `ncclwatch-report where shim|package`: where this installation's other files are. The one place
// that knows the layouts, found from this program's own path: a build folder (build/analyzers,
// beside build/shim, inside a source tree with python/), a wheel (the package's bin/, beside its
// lib/) and a prefix install (bin/ beside lib/, lib/<multiarch>/ or lib64/). The launcher and the
// Python package find this program and ask it, rather than probe for the rest themselves.
#include "reports/commands.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <vector>

namespace ncclwatch::report {
namespace {

namespace fs = std::filesystem;

// This program's folder, links resolved ("" when /proc is not mounted).
fs::path own_folder() {
  std::error_code unreadable;
  fs::path exe = fs::read_symlink("/proc/self/exe", unreadable);
  return unreadable ? fs::path() : exe.parent_path();
}

bool is_file(const fs::path& p) {
  std::error_code unreadable;
  return fs::is_regular_file(p, unreadable);
}

fs::path resolved(const fs::path& p) {
  std::error_code unreadable;
  fs::path c = fs::weakly_canonical(p, unreadable);
  return unreadable ? p.lexically_normal() : c;
}

std::optional<std::string> shim_beside(const fs::path& here) {
  std::vector<fs::path> candidates = {here / ".." / "shim", here / ".." / "lib", here / ".." / "lib64"};
  std::error_code unreadable;
  for (fs::directory_iterator it(here / ".." / "lib", unreadable), end; !unreadable && it != end; it.increment(unreadable))
    if (it->is_directory(unreadable)) candidates.push_back(it->path());  // lib/<multiarch>/
  for (const fs::path& folder : candidates)
    if (is_file(folder / "libncclwatch.so")) return resolved(folder / "libncclwatch.so").string();
  return std::nullopt;
}

}  // namespace

std::optional<std::string> installed_path(std::string_view what) {
  if (what == "shim")
    if (const char* asked = std::getenv("NCCLWATCH_SHIM"); asked && *asked) return std::string(asked);
  fs::path here = own_folder();
  if (here.empty()) return std::nullopt;
  if (what == "shim") return shim_beside(here);
  // The folder that holds the package (what PYTHONPATH needs): the wheel's site-packages, or a
  // source tree's python/ when this is its build.
  for (const fs::path& parent : {here / ".." / "..", here / ".." / ".." / "python"})
    if (is_file(parent / "ncclwatch" / "__init__.py") && is_file(parent / "ncclwatch" / "_sql.py"))
      return resolved(parent).string();
  return std::nullopt;
}

int run_where(const std::string& what) {
  if (std::optional<std::string> path = installed_path(what)) {
    std::cout << *path << '\n';
    return 0;
  }
  if (what == "shim")
    say("libncclwatch.so is not installed beside {} (build it with scripts/build, or set NCCLWATCH_SHIM)",
        own_folder().string());
  else
    say("the ncclwatch Python package is not installed beside {} (pip install ncclwatch, or PYTHONPATH=<source>/python)",
        own_folder().string());
  return 1;
}

}  // namespace ncclwatch::report
