#include "elf_image.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace ncclwatch {
namespace {

uint32_t gnu_hash(const char* name) {
  uint32_t h = 5381;
  for (auto c = reinterpret_cast<const unsigned char*>(name); *c; ++c) h = h * 33 + *c;
  return h;
}

uint32_t sysv_hash(const char* name) {
  uint32_t h = 0;
  for (auto c = reinterpret_cast<const unsigned char*>(name); *c; ++c) {
    h = (h << 4) + *c;
    uint32_t g = h & 0xf0000000u;
    if (g) h ^= g >> 24;
    h &= ~g;
  }
  return h;
}

// A larger .symtab is not worth the pages it would fault in at exit.
constexpr size_t kMaxSymtabBytes = size_t{256} << 20;

}  // namespace

LoadedImage::LoadedImage(const dl_phdr_info& info) : load_bias_(info.dlpi_addr) {
  const ElfW(Dyn)* dynamic = nullptr;
  for (int i = 0; i < info.dlpi_phnum; ++i)
    if (info.dlpi_phdr[i].p_type == PT_DYNAMIC)
      dynamic = reinterpret_cast<const ElfW(Dyn)*>(info.dlpi_addr + info.dlpi_phdr[i].p_vaddr);
  if (!dynamic) return;
  // glibc rewrites most address tags to absolute addresses in place; where it could not (a
  // read-only dynamic section) they are still offsets from the load address.
  auto address = [&](ElfW(Addr) value) { return value < load_bias_ ? value + load_bias_ : value; };
  for (const ElfW(Dyn)* d = dynamic; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB: symtab_ = reinterpret_cast<const ElfW(Sym)*>(address(d->d_un.d_ptr)); break;
      case DT_STRTAB: strtab_ = reinterpret_cast<const char*>(address(d->d_un.d_ptr)); break;
      case DT_GNU_HASH: gnu_hash_ = reinterpret_cast<const uint32_t*>(address(d->d_un.d_ptr)); break;
      case DT_HASH: sysv_hash_ = reinterpret_cast<const uint32_t*>(address(d->d_un.d_ptr)); break;
      case DT_JMPREL: plt_relocations_ = reinterpret_cast<const ElfW(Rela)*>(address(d->d_un.d_ptr)); break;
      case DT_PLTRELSZ: plt_relocation_bytes_ = d->d_un.d_val; break;
      case DT_RELA: relocations_ = reinterpret_cast<const ElfW(Rela)*>(address(d->d_un.d_ptr)); break;
      case DT_RELASZ: relocation_bytes_ = d->d_un.d_val; break;
      case DT_SYMBOLIC: symbolic_ = true; break;
      case DT_FLAGS: symbolic_ |= (d->d_un.d_val & DF_SYMBOLIC) != 0; break;
      default: break;
    }
  }
}

const ElfW(Sym)* LoadedImage::find(const char* name) const {
  if (!valid()) return nullptr;
  if (gnu_hash_) {
    uint32_t nbuckets = gnu_hash_[0], symoffset = gnu_hash_[1], bloom_words = gnu_hash_[2];
    if (nbuckets == 0) return nullptr;
    auto buckets = reinterpret_cast<const uint32_t*>(reinterpret_cast<const ElfW(Addr)*>(gnu_hash_ + 4) + bloom_words);
    const uint32_t* chain = buckets + nbuckets;
    uint32_t h = gnu_hash(name);
    uint32_t index = buckets[h % nbuckets];
    if (index < symoffset) return nullptr;
    for (;; ++index) {
      uint32_t entry = chain[index - symoffset];
      if ((entry | 1) == (h | 1) && std::strcmp(strtab_ + symtab_[index].st_name, name) == 0) return &symtab_[index];
      if (entry & 1) return nullptr;
    }
  }
  if (sysv_hash_) {
    uint32_t nbuckets = sysv_hash_[0];
    if (nbuckets == 0) return nullptr;
    const uint32_t* buckets = sysv_hash_ + 2;
    const uint32_t* chain = buckets + nbuckets;
    for (uint32_t i = buckets[sysv_hash(name) % nbuckets]; i != STN_UNDEF; i = chain[i])
      if (std::strcmp(strtab_ + symtab_[i].st_name, name) == 0) return &symtab_[i];
  }
  return nullptr;
}

const void* LoadedImage::defined_address(const char* name) const {
  const ElfW(Sym)* sym = find(name);
  if (!sym || sym->st_shndx == SHN_UNDEF || sym->st_value == 0) return nullptr;
  return reinterpret_cast<const void*>(load_bias_ + sym->st_value);
}

bool LoadedImage::relocations_name(const ElfW(Rela)* first, size_t bytes, const char* prefix) const {
  if (!first || !valid()) return false;
  size_t prefix_len = std::strlen(prefix);
  for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
    size_t sym = ELF64_R_SYM(first[i].r_info);
    if (sym != STN_UNDEF && std::strncmp(strtab_ + symtab_[sym].st_name, prefix, prefix_len) == 0) return true;
  }
  return false;
}

bool LoadedImage::relocates_symbols_starting_with(const char* prefix) const {
  return relocations_name(plt_relocations_, plt_relocation_bytes_, prefix) ||
         relocations_name(relocations_, relocation_bytes_, prefix);
}

bool file_defines_symbol(const std::string& path, const char* name) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st{};
  bool found = false;
  void* map = MAP_FAILED;
  size_t size = 0;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= static_cast<off_t>(sizeof(ElfW(Ehdr)))) {
    size = static_cast<size_t>(st.st_size);
    map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  }
  ::close(fd);
  if (map == MAP_FAILED) return false;
  auto bytes = static_cast<const unsigned char*>(map);
  auto ehdr = reinterpret_cast<const ElfW(Ehdr)*>(bytes);
  auto within = [&](size_t offset, size_t length) { return offset <= size && length <= size - offset; };
  bool sane = std::memcmp(ehdr->e_ident, ELFMAG, SELFMAG) == 0 && ehdr->e_ident[EI_CLASS] == ELFCLASS64 &&
              ehdr->e_shentsize == sizeof(ElfW(Shdr)) &&
              within(ehdr->e_shoff, size_t{ehdr->e_shnum} * sizeof(ElfW(Shdr)));
  size_t name_len = std::strlen(name);
  for (size_t s = 0; sane && !found && s < ehdr->e_shnum; ++s) {
    auto sections = reinterpret_cast<const ElfW(Shdr)*>(bytes + ehdr->e_shoff);
    const ElfW(Shdr)& symtab = sections[s];
    if (symtab.sh_type != SHT_SYMTAB || symtab.sh_link >= ehdr->e_shnum) continue;
    const ElfW(Shdr)& strtab = sections[symtab.sh_link];
    if (symtab.sh_size > kMaxSymtabBytes || !within(symtab.sh_offset, symtab.sh_size) ||
        !within(strtab.sh_offset, strtab.sh_size))
      continue;
    auto syms = reinterpret_cast<const ElfW(Sym)*>(bytes + symtab.sh_offset);
    const char* strings = reinterpret_cast<const char*>(bytes + strtab.sh_offset);
    for (size_t i = 0; i < symtab.sh_size / sizeof(ElfW(Sym)); ++i) {
      size_t at = syms[i].st_name;
      if (syms[i].st_shndx == SHN_UNDEF || at >= strtab.sh_size || strtab.sh_size - at <= name_len) continue;
      if (std::memcmp(strings + at, name, name_len + 1) == 0) {
        found = true;
        break;
      }
    }
  }
  ::munmap(map, size);
  return found;
}

}  // namespace ncclwatch
