#include "bound_wrappers.h"

#include "nccl_api.h"
#include "resolver.h"

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

// The wrapped entries of nccl_api.def (QUERY ones are called by the shim, not wrapped).
#define NCCLWATCH_WRAPPED_QUERY(name)
#define NCCLWATCH_WRAPPED_LIFECYCLE(name) X(name)
#define NCCLWATCH_WRAPPED_RESOURCE(name) X(name)
#define NCCLWATCH_WRAPPED_COLLECTIVE(name) X(name)
#define NCCLWATCH_WRAPPED_P2P(name) X(name)
#define NCCLWATCH_WRAPPED_GROUP(name) X(name)
#define NCCLWATCH_API(group, name, since) NCCLWATCH_WRAPPED_##group(name)

constexpr const char* kWrappedNames[] = {
#define X(name) #name,
#include "nccl_api.def"
#undef X
};
constexpr size_t kWrappedCount = sizeof(kWrappedNames) / sizeof(kWrappedNames[0]);

// Built at first use (a function-local static), so a dlsym from another library's constructor,
// before this file's static initialisers ran, still finds a complete table.
template <int Slot> void* const* slot_table() {
  static void* const table[kWrappedCount] = {
#define X(name) reinterpret_cast<void*>(&Bound<Slot, &::name>::call),
#include "nccl_api.def"
#undef X
  };
  return table;
}

#undef NCCLWATCH_API

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
