// The little the shim reads of ELF objects: does an object define NCCL's API, and do its own
// calls to it pass through the dynamic linker? Written by hand rather than with libelf: the shim
// is preloaded into every process and must bring no dependency of its own, and it needs only
// symbol names, dynamic tags and relocations. Every read is bounds-checked: a file on disk may be
// anything.
#pragma once

#include <link.h>

#include <string>

namespace ncclwatch {

// A loaded object's dynamic section, as the dynamic linker left it in memory.
class LoadedImage {
 public:
  explicit LoadedImage(const dl_phdr_info& info);
  bool valid() const { return symtab_ != nullptr && strtab_ != nullptr; }

  // The address of `name` when this object's dynamic symbol table defines it, else nullptr.
  const void* defined_address(const char* name) const;
  // Linked -Bsymbolic (DT_SYMBOLIC / DF_SYMBOLIC): its calls to its own exports never leave it.
  bool binds_symbolically() const { return symbolic_; }
  // A relocation (PLT slot or GOT entry) names a symbol starting with `prefix`: calls from this
  // object to such functions go through the dynamic linker, where a preload can take them.
  bool relocates_symbols_starting_with(const char* prefix) const;

 private:
  const ElfW(Sym)* find(const char* name) const;
  bool relocations_name(const ElfW(Rela)* first, size_t bytes, const char* prefix) const;

  ElfW(Addr) load_bias_ = 0;
  const ElfW(Sym)* symtab_ = nullptr;
  const char* strtab_ = nullptr;
  const uint32_t* gnu_hash_ = nullptr;
  const uint32_t* sysv_hash_ = nullptr;
  const ElfW(Rela)* plt_relocations_ = nullptr;
  size_t plt_relocation_bytes_ = 0;
  const ElfW(Rela)* relocations_ = nullptr;
  size_t relocation_bytes_ = 0;
  bool symbolic_ = false;
};

// An object's file on disk, mapped read-only. Any unreadable or odd file reads as empty.
class ElfFile {
 public:
  explicit ElfFile(const std::string& path);
  ~ElfFile();
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;

  // The static symbol table (.symtab, absent from stripped files) defines `name`: NCCL linked in
  // with hidden symbols shows only there.
  bool defines_symbol(const char* name) const;
  // NCCL's version banner ("NCCL version 2.28.9+cuda13.0") in .rodata: NCCL's own code is in
  // the object, not just functions of its names (stubs that forward to a dlopen'ed NCCL). Its
  // version code, 0 if unparsable; -1 when there is no banner.
  int nccl_banner_version() const;

 private:
  const ElfW(Shdr)* section(size_t index) const;
  bool within(size_t offset, size_t length) const { return offset <= size_ && length <= size_ - offset; }

  const unsigned char* bytes_ = nullptr;
  size_t size_ = 0;
  size_t nsections_ = 0;
};

}  // namespace ncclwatch
