// Prints what rendezvous.h agreed on, for test_mprun.py to compare across
// ranks: one line per unique-id tag, and a line after each barrier.
#include "rendezvous.h"

#include <cstdio>

namespace {
void print_id(const char* tag) {
  ncclUniqueId id = rendezvous_unique_id(tag);
  printf("id %s ", tag);
  for (size_t i = 0; i < 16; ++i) printf("%02x", static_cast<unsigned char>(id.internal[i]));
  printf("\n");
}
}  // namespace

int main() {
  printf("rank %d of %d\n", test_rank(), test_nranks());
  print_id("world");
  print_id("other");
  // The same tag twice: each use is its own barrier.
  for (int i = 0; i < 2; ++i) {
    rendezvous_barrier("again");
    printf("passed barrier %d\n", i);
  }
  return 0;
}
