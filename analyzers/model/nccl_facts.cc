#include "model/nccl_facts.h"

#include <iterator>

namespace ncclwatch::model {

using trace::Api;

size_t datatype_size(uint8_t datatype) {
  switch (datatype) {
    case 0: case 1: case 10: case 11: return 1;  // int8, uint8, fp8 e4m3, fp8 e5m2
    case 6: case 9: return 2;                     // half, bfloat16
    case 2: case 3: case 7: return 4;             // int32, uint32, float
    case 4: case 5: case 8: return 8;             // int64, uint64, double
    default: return 0;
  }
}

const char* datatype_name(uint8_t datatype) {
  static constexpr const char* names[] = {"int8",    "uint8",    "int32",    "uint32",   "int64",     "uint64",
                                          "float16", "float32",  "float64",  "bfloat16", "float8e4m3", "float8e5m2"};
  return datatype < std::size(names) ? names[datatype] : "unknown";
}

const char* redop_name(int32_t redop) {
  switch (redop) {
    case -1: return "none";
    case 0: return "sum";
    case 1: return "prod";
    case 2: return "max";
    case 3: return "min";
    case 4: return "avg";
    default: return "custom";
  }
}

uint64_t bytes_of(Api api, uint64_t count, uint8_t datatype, int32_t nranks) {
  uint64_t element = datatype_size(datatype);
  uint64_t n = nranks > 0 ? static_cast<uint64_t>(nranks) : 1;
  switch (api) {
    case Api::kAllGather:      // count is the sendcount: the receive buffer holds n of them
    case Api::kReduceScatter:  // count is the recvcount: the send buffer holds n of them
    case Api::kAlltoAll:       // count goes to each peer
    case Api::kGather:
    case Api::kScatter: break;
    default: n = 1;
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(count, n, &bytes) || __builtin_mul_overflow(bytes, element, &bytes)) return kSizePastRange;
  return bytes;
}

double busbw_factor(Api api, int32_t nranks) {
  double n = nranks > 0 ? nranks : 1;
  switch (api) {
    case Api::kAllReduce: return 2.0 * (n - 1) / n;
    case Api::kAllGather:
    case Api::kReduceScatter:
    case Api::kAlltoAll:
    case Api::kGather:
    case Api::kScatter: return (n - 1) / n;
    default: return 1.0;  // broadcast, reduce, send/recv, grouped launches
  }
}

}  // namespace ncclwatch::model
