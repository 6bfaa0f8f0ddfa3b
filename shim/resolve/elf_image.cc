#include "resolve/elf_image.h"

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

ElfFile::ElfFile(const std::string& path) {
  // O_NONBLOCK: a path that names a FIFO must not hang the process.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return;
  struct stat st{};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= static_cast<off_t>(sizeof(ElfW(Ehdr)))) {
    void* map = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (map != MAP_FAILED) {
      bytes_ = static_cast<const unsigned char*>(map);
      size_ = static_cast<size_t>(st.st_size);
    }
  }
  ::close(fd);
  if (!bytes_) return;
  auto ehdr = reinterpret_cast<const ElfW(Ehdr)*>(bytes_);
  if (std::memcmp(ehdr->e_ident, ELFMAG, SELFMAG) == 0 && ehdr->e_ident[EI_CLASS] == ELFCLASS64 &&
      ehdr->e_shentsize == sizeof(ElfW(Shdr)) && within(ehdr->e_shoff, size_t{ehdr->e_shnum} * sizeof(ElfW(Shdr))))
    nsections_ = ehdr->e_shnum;
}

ElfFile::~ElfFile() {
  if (bytes_) ::munmap(const_cast<unsigned char*>(bytes_), size_);
}

const ElfW(Shdr)* ElfFile::section(size_t index) const {
  if (index >= nsections_) return nullptr;
  auto ehdr = reinterpret_cast<const ElfW(Ehdr)*>(bytes_);
  const ElfW(Shdr)* s = reinterpret_cast<const ElfW(Shdr)*>(bytes_ + ehdr->e_shoff) + index;
  return within(s->sh_offset, s->sh_size) ? s : nullptr;  // every section we read has its bytes in the file
}

bool ElfFile::defines_symbol(const char* name) const {
  size_t name_len = std::strlen(name);
  for (size_t s = 0; s < nsections_; ++s) {
    const ElfW(Shdr)* symtab = section(s);
    if (!symtab || symtab->sh_type != SHT_SYMTAB || symtab->sh_size > kMaxSymtabBytes) continue;
    const ElfW(Shdr)* strtab = section(symtab->sh_link);
    if (!strtab || strtab->sh_type != SHT_STRTAB) continue;
    auto syms = reinterpret_cast<const ElfW(Sym)*>(bytes_ + symtab->sh_offset);
    const char* strings = reinterpret_cast<const char*>(bytes_ + strtab->sh_offset);
    for (size_t i = 0; i < symtab->sh_size / sizeof(ElfW(Sym)); ++i) {
      size_t at = syms[i].st_name;
      if (syms[i].st_shndx == SHN_UNDEF || at >= strtab->sh_size || strtab->sh_size - at <= name_len) continue;
      if (std::memcmp(strings + at, name, name_len + 1) == 0) return true;
    }
  }
  return false;
}

int ElfFile::nccl_banner_version() const {
  auto ehdr = reinterpret_cast<const ElfW(Ehdr)*>(bytes_);
  const ElfW(Shdr)* names = nsections_ ? section(ehdr->e_shstrndx) : nullptr;
  if (!names || names->sh_type != SHT_STRTAB) return -1;
  static constexpr char kBanner[] = "NCCL version ";
  static constexpr char kRodata[] = ".rodata";  // compared with its NUL
  for (size_t s = 0; s < nsections_; ++s) {
    const ElfW(Shdr)* rodata = section(s);
    if (!rodata || rodata->sh_type != SHT_PROGBITS || rodata->sh_name >= names->sh_size ||
        names->sh_size - rodata->sh_name < sizeof(kRodata) ||
        std::memcmp(bytes_ + names->sh_offset + rodata->sh_name, kRodata, sizeof(kRodata)) != 0)
      continue;
    const auto* begin = reinterpret_cast<const char*>(bytes_ + rodata->sh_offset);
    const char* end = begin + rodata->sh_size;
    for (const char* at = begin; at < end;) {
      const void* hit = memmem(at, static_cast<size_t>(end - at), kBanner, sizeof(kBanner) - 1);
      if (!hit) break;
      const char* digits = static_cast<const char*>(hit) + sizeof(kBanner) - 1;
      int parts[3] = {0, 0, 0}, part = 0;
      const char* p = digits;
      for (; p < end && part < 3; ++p) {
        if (*p >= '0' && *p <= '9') parts[part] = parts[part] * 10 + (*p - '0');
        else if (*p == '.') ++part;
        else break;
      }
      if (p > digits && *digits >= '0' && *digits <= '9') return parts[0] * 10000 + parts[1] * 100 + parts[2];
      at = digits;  // "NCCL version " not followed by a number (a format string): look further
    }
  }
  return -1;
}

}  // namespace ncclwatch
