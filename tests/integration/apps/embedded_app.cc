// Runs the job of a library that carries its own NCCL (embedded_nccl.cc).
#include <cstdio>

extern "C" int run_embedded_job();

int main() {
  int status = run_embedded_job();
  std::printf("embedded_app: done\n");
  return status;
}
