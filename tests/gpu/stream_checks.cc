// Real-CUDA checks of the shim's launch path on one GPU (a communicator of one rank):
//   stream_checks stall     60 all-reduces complete, then a host function holds the stream for
//                           6 s in front of 40 more: the watchdog (NCCLWATCH_STALL_SEC=2) must
//                           name a launch at or before the first held one, then see it resolve.
//   stream_checks capture   all-reduces captured into a CUDA graph after eager ones: capture
//                           must succeed with the same graph nodes as without the shim, and the
//                           graph must replay. Prints "graph nodes N".
//   stream_checks exit      a host function holds the stream 0.1 s in front of 200 all-reduces,
//                           then the program returns: no synchronize, no destroy. Under the shim
//                           every launch must still get its GPU timing (NCCLWATCH_SAMPLE=1).
// Build: nvcc -O2 -o stream_checks stream_checks.cc -lnccl
#include "cuda_check.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

void CUDART_CB hold_stream(void* seconds) { sleep(*static_cast<unsigned*>(seconds)); }

}  // namespace

int main(int argc, char** argv) {
  std::string_view mode = argc > 1 ? argv[1] : "stall";
  ncclComm_t comm;
  int device = 0;
  CK(ncclCommInitAll(&comm, 1, &device));
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float* buf;
  CK(cudaMalloc(&buf, 1 << 20));
  // Out of place: even on one rank NCCL then has work to launch (a copy), so captures hold nodes.
  auto all_reduce = [&] { CK(ncclAllReduce(buf, buf + 1024, 1024, ncclFloat, ncclSum, comm, stream)); };
  if (mode == "stall") {
    for (int i = 0; i < 50; ++i) all_reduce();  // seqs 1-50
    CK(cudaStreamSynchronize(stream));
    for (int i = 0; i < 10; ++i) all_reduce();  // 51-60
    static unsigned seconds = 6;
    CK(cudaLaunchHostFunc(stream, hold_stream, &seconds));
    for (int i = 0; i < 40; ++i) all_reduce();  // 61-100: held
    CK(cudaStreamSynchronize(stream));
    sleep(1);  // the watchdog sees the stall resolve
    std::printf("stall done\n");
  } else if (mode == "ring") {
    // 100,000 all-reduces of two sizes: far more than a 1 MiB trace's ring holds.
    for (int i = 1; i <= 100000; ++i)
      CK(ncclAllReduce(buf, buf + 1024, i % 2 ? 1024 : 16, ncclFloat, ncclSum, comm, stream));
    CK(cudaStreamSynchronize(stream));
    std::printf("ring done\n");
  } else if (mode == "exit") {
    CK(cudaLaunchHostFunc(stream, [](void*) { usleep(100000); }, nullptr));
    for (int i = 0; i < 200; ++i) all_reduce();
    std::printf("exiting with 200 all-reduces queued\n");
    return 0;  // no synchronize, no destroy: the work is still running at exit
  } else {
    for (int i = 0; i < 5; ++i) all_reduce();
    // As PyTorch and nccl-tests do before a capture: the stream is drained first.
    CK(cudaStreamSynchronize(stream));
    CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < 3; ++i) all_reduce();
    cudaGraph_t graph;
    CK(cudaStreamEndCapture(stream, &graph));
    size_t nodes = 0;
    CK(cudaGraphGetNodes(graph, nullptr, &nodes));
    cudaGraphExec_t exec;
    CK(cudaGraphInstantiate(&exec, graph, 0));
    for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(exec, stream));
    for (int i = 0; i < 5; ++i) all_reduce();
    CK(cudaStreamSynchronize(stream));
    std::printf("graph nodes %zu\n", nodes);
  }
  CK(ncclCommDestroy(comm));
  return 0;
}
