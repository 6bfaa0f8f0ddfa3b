// Reading several trace files at once, each on the next free thread.
#pragma once

#include <cstddef>
#include <functional>

namespace ncclwatch::model {

// How many files to read at once: the machine's cores, never more than the files.
unsigned reader_threads(size_t files);

// Calls work(index, thread) for every index in [0, count), spread over `threads` threads that take
// the next index as they finish one (files differ in size).
void parallel_for(size_t count, unsigned threads, const std::function<void(size_t, unsigned)>& work);

}  // namespace ncclwatch::model
