// What NCCL's arguments mean in bytes and names, as nccl-tests counts them: element sizes, the
// "size" of an op, the bus bandwidth factor, datatype and reduction names.
#pragma once

#include <ncclwatch/trace_format.h>

#include <cstddef>
#include <cstdint>

namespace ncclwatch::model {

// Byte size of one element of an ncclDataType_t (0 when unknown).
size_t datatype_size(uint8_t datatype);
const char* datatype_name(uint8_t datatype);
const char* redop_name(int32_t redop);  // "sum", ..., "custom" for premulsum and user ops
// nccl-tests' "size" of an op: the larger of its buffers, e.g. count * nranks elements for
// AllGather (count is its sendcount) and ReduceScatter (count is its recvcount). A size past 2^64
// (a count no buffer has: a damaged or hostile trace) is kSizePastRange, never the product
// wrapped round to a small size.
inline constexpr uint64_t kSizePastRange = UINT64_MAX;
uint64_t bytes_of(trace::Api api, uint64_t count, uint8_t datatype, int32_t nranks);
// nccl-tests' bus bandwidth factor for an op on `nranks` ranks.
double busbw_factor(trace::Api api, int32_t nranks);

}  // namespace ncclwatch::model
