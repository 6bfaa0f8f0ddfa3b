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

// True when the file's static symbol table (.symtab, absent from stripped files) defines `name`:
// NCCL linked in with hidden symbols shows only there. False on any unreadable or odd file.
bool file_defines_symbol(const std::string& path, const char* name);

}  // namespace ncclwatch
