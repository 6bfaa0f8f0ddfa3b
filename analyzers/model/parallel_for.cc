#include "model/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace ncclwatch::model {

unsigned reader_threads(size_t files) {
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(cores, files)));
}

void parallel_for(size_t count, unsigned threads, const std::function<void(size_t, unsigned)>& work) {
  std::atomic<size_t> next{0};
  auto loop = [&](unsigned thread) {
    for (size_t i = next++; i < count; i = next++) work(i, thread);
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(loop, t);
  loop(0);
  for (std::thread& t : pool) t.join();
}

}  // namespace ncclwatch::model
