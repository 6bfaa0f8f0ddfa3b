#include "resolve/bound_wrappers.h"

#include "resolve/nccl_api.h"
#include "resolve/resolver.h"

#include <cstring>
#include <array>
#include <utility>

namespace ncclwatch {
namespace {

template <int Slot, auto Wrapper> struct Bound;
template <int Slot, class... Args, ncclResult_t (*Wrapper)(Args...)> struct Bound<Slot, Wrapper> {
  static ncclResult_t call(Args... args) {
    BoundSlotScope scope(static_cast<uint8_t>(Slot));
    return Wrapper(args...);
  }
};

// The wrapped entries of the API table (the untraced queries are called by the shim, not wrapped).
#define NCCLWATCH_WRAPPED(name) #name,
constexpr const char* kWrappedNames[] = {
#define NCCLWATCH_TRACED(kind, name, since, Id, value) NCCLWATCH_WRAPPED(name)
#define NCCLWATCH_TRACED_AS(kind, name, since, Id) NCCLWATCH_WRAPPED(name)
#include <ncclwatch/nccl_api.def>
};
#undef NCCLWATCH_WRAPPED
constexpr size_t kWrappedCount = sizeof(kWrappedNames) / sizeof(kWrappedNames[0]);

// Built at first use (a function-local static), so a dlsym from another library's constructor,
// before this file's static initialisers ran, still finds a complete table.
template <int Slot> void* const* slot_table() {
#define NCCLWATCH_WRAPPED(name) reinterpret_cast<void*>(&Bound<Slot, &::name>::call),
  static void* const table[kWrappedCount] = {
#define NCCLWATCH_TRACED(kind, name, since, Id, value) NCCLWATCH_WRAPPED(name)
#define NCCLWATCH_TRACED_AS(kind, name, since, Id) NCCLWATCH_WRAPPED(name)
#include <ncclwatch/nccl_api.def>
  };
#undef NCCLWATCH_WRAPPED
  return table;
}

template <size_t... Slots> constexpr auto make_tables(std::index_sequence<Slots...>) {
  return std::array<void* const* (*)(), sizeof...(Slots)>{&slot_table<static_cast<int>(Slots)>...};
}
// Function addresses only: constant-initialised, valid before any constructor runs.
constexpr auto kTables = make_tables(std::make_index_sequence<kMaxLibraries>{});

}  // namespace

void* bound_wrapper(int slot, const char* name) noexcept {
  if (slot < 0 || slot >= kMaxLibraries || !name) return nullptr;
  for (size_t i = 0; i < kWrappedCount; ++i)
    if (std::strcmp(kWrappedNames[i], name) == 0) return kTables[static_cast<size_t>(slot)]()[i];
  return nullptr;
}

}  // namespace ncclwatch
