// The shim reads the files of every object loaded in the process: any file, however broken,
// must read as "nothing found", never crash; a real one must give its symbols and NCCL banner.
#include "resolve/elf_image.h"

#include <catch2/catch.hpp>

#include <link.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

using ncclwatch::ElfFile;
using ncclwatch::LoadedImage;

namespace {

std::string self_path() {
  char buffer[4096];
  ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  return std::string(buffer, n > 0 ? static_cast<size_t>(n) : 0);
}

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string write_temp(const std::vector<char>& bytes) {
  char path[] = "/tmp/ncclwatch-elf-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  close(fd);
  return path;
}

// Marks this test program as a carrier of an NCCL banner, as the real library's .rodata does.
extern "C" __attribute__((used)) const char kBannerForTest[] = "NCCL version 2.21.5+cuda12.4";

}  // namespace

extern "C" __attribute__((used, noinline)) int ncclwatch_elf_test_marker() { return 42; }

TEST_CASE("a real file gives its static symbols and the NCCL banner's version") {
  ElfFile self(self_path());
  CHECK(self.defines_symbol("ncclwatch_elf_test_marker"));
  CHECK_FALSE(self.defines_symbol("ncclwatch_no_such_symbol"));
  CHECK(self.nccl_banner_version() == 22105);
}

TEST_CASE("broken files read as nothing found") {
  std::vector<char> real = read_all(self_path());
  REQUIRE(real.size() > 4096);
  std::mt19937 random(7);
  std::vector<std::vector<char>> broken = {
      {},                                                            // empty
      std::vector<char>(real.begin(), real.begin() + 64),            // just the ELF header
      std::vector<char>(real.begin(), real.begin() + real.size() / 2),  // cut in the middle
      std::vector<char>(4096, 'x'),                                  // not ELF
  };
  std::vector<char> scrambled = real;  // section headers pointing anywhere
  for (size_t i = 0; i < 2000; ++i) scrambled[random() % scrambled.size()] = static_cast<char>(random());
  auto* header = reinterpret_cast<ElfW(Ehdr)*>(scrambled.data());
  header->e_shoff = real.size() - 100;  // the table runs past the end
  broken.push_back(scrambled);
  for (const auto& bytes : broken) {
    std::string path = write_temp(bytes);
    ElfFile file(path);
    CHECK_FALSE(file.defines_symbol("ncclwatch_elf_test_marker"));
    CHECK(file.nccl_banner_version() == -1);
    std::remove(path.c_str());
  }
  ElfFile missing("/nonexistent/libnccl.so.2");
  CHECK_FALSE(missing.defines_symbol("ncclCommInitRank"));
}

TEST_CASE("loaded images answer from their dynamic symbol table") {
  struct Found {
    bool libc_has_malloc = false;
    bool libc_has_nonsense = false;
  } found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        auto& f = *static_cast<Found*>(out);
        if (!info->dlpi_name || !std::strstr(info->dlpi_name, "libc.so")) return 0;
        LoadedImage image(*info);
        f.libc_has_malloc = image.defined_address("malloc") != nullptr;
        f.libc_has_nonsense = image.defined_address("ncclwatch_not_in_libc") != nullptr;
        return 1;
      },
      &found);
  CHECK(found.libc_has_malloc);
  CHECK_FALSE(found.libc_has_nonsense);
}
