// Element types and reductions of the NCCL stand-in. Header-only so tests can
// compute references with the same float16/bfloat16 conversions.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace hostnccl {

// ----------------------------------------------------------------- 16-bit floats

inline uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

inline float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000 | (man << 13));  // inf, nan
  if (exp == 0) {
    if (man == 0) return bits_float(sign);
    // Subnormal: value = man * 2^-24.
    float v = float(man) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112) << 23) | (man << 13));
}

// Round to nearest even, as the GPU's conversion does.
inline uint16_t float_to_half(float f) {
  uint32_t u = float_bits(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000);
  uint32_t exp = (u >> 23) & 0xff;
  uint32_t man = u & 0x7fffff;
  if (exp == 0xff) return uint16_t(sign | 0x7c00 | (man ? 0x200 : 0));
  int e = int(exp) - 127 + 15;
  if (e >= 0x1f) return uint16_t(sign | 0x7c00);  // overflow to inf
  if (e <= 0) {
    if (e < -10) return sign;  // underflows to zero
    man |= 0x800000;
    int shift = 14 - e;
    uint32_t half_man = man >> shift;
    uint32_t rest = man & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half_man & 1))) ++half_man;
    return uint16_t(sign | half_man);
  }
  uint32_t half = (uint32_t(e) << 10) | (man >> 13);
  uint32_t rest = man & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;  // may carry into exp: correct
  return uint16_t(sign | half);
}

inline float bf16_to_float(uint16_t b) { return bits_float(uint32_t(b) << 16); }

inline uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffff) > 0x7f800000) return uint16_t((u >> 16) | 0x40);  // quiet nan
  u += 0x7fff + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}

// Storage type and the type arithmetic happens in.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

template <class T>
struct Elem {
  using Acc = T;
  static Acc load(const void* p, size_t i) {
    T v;
    memcpy(&v, static_cast<const char*>(p) + i * sizeof(T), sizeof(T));
    return v;
  }
  static void store(void* p, size_t i, Acc v) {
    memcpy(static_cast<char*>(p) + i * sizeof(T), &v, sizeof(T));
  }
};

template <>
struct Elem<Half> {
  using Acc = float;
  static Acc load(const void* p, size_t i) {
    uint16_t b;
    memcpy(&b, static_cast<const char*>(p) + i * 2, 2);
    return half_to_float(b);
  }
  static void store(void* p, size_t i, Acc v) {
    uint16_t b = float_to_half(v);
    memcpy(static_cast<char*>(p) + i * 2, &b, 2);
  }
};

template <>
struct Elem<BFloat16> {
  using Acc = float;
  static Acc load(const void* p, size_t i) {
    uint16_t b;
    memcpy(&b, static_cast<const char*>(p) + i * 2, 2);
    return bf16_to_float(b);
  }
  static void store(void* p, size_t i, Acc v) {
    uint16_t b = float_to_bf16(v);
    memcpy(static_cast<char*>(p) + i * 2, &b, 2);
  }
};

// 0 for types the stand-in does not support (fp8) or invalid values.
inline size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 0;
  }
}

// Calls f(Elem<T>{}) for the storage type of t; t must be supported.
template <class F>
void dispatch_type(ncclDataType_t t, F&& f) {
  switch (t) {
    case ncclInt8: f(Elem<int8_t>{}); break;
    case ncclUint8: f(Elem<uint8_t>{}); break;
    case ncclInt32: f(Elem<int32_t>{}); break;
    case ncclUint32: f(Elem<uint32_t>{}); break;
    case ncclInt64: f(Elem<int64_t>{}); break;
    case ncclUint64: f(Elem<uint64_t>{}); break;
    case ncclFloat16: f(Elem<Half>{}); break;
    case ncclFloat32: f(Elem<float>{}); break;
    case ncclFloat64: f(Elem<double>{}); break;
    case ncclBfloat16: f(Elem<BFloat16>{}); break;
    default: break;
  }
}

// ------------------------------------------------------------------ arithmetic

// Integers wrap like the GPU's instead of overflowing (undefined in C++).
template <class T>
T add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(U(a) + U(b)));
  } else {
    return a + b;
  }
}

template <class T>
T mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    // Narrow types would promote to int, whose product can overflow.
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return T(U(W(U(a)) * W(U(b))));
  } else {
    return a * b;
  }
}

// op is one of the built-in ops (PreMulSum is applied before, as a sum).
template <class T>
T combine(ncclRedOp_t op, T a, T b) {
  switch (op) {
    case ncclProd: return mul(a, b);
    case ncclMax: return b > a ? b : a;
    case ncclMin: return b < a ? b : a;
    default: return add(a, b);  // sum, avg, premulsum
  }
}

// One rank's contribution: `elems` elements of the reduction's type.
struct Contribution {
  const void* data;
  size_t elems;
};

// dst[i] = op over the contributions that have element i, i < count.
// Elements nobody has are left as they are.
inline void reduce(ncclDataType_t type, ncclRedOp_t op, void* dst, size_t count,
                   const std::vector<Contribution>& srcs) {
  dispatch_type(type, [&](auto e) {
    using E = decltype(e);
    using Acc = typename E::Acc;
    for (size_t i = 0; i < count; ++i) {
      Acc acc{};
      int n = 0;
      for (const auto& s : srcs) {
        if (i >= s.elems) continue;
        Acc v = E::load(s.data, i);
        acc = n == 0 ? v : combine(op, acc, v);
        ++n;
      }
      if (n == 0) continue;
      if (op == ncclAvg) acc = Acc(acc / Acc(n));
      E::store(dst, i, acc);
    }
  });
}

// buf[i] *= scalar, where scalar is one element of the same type.
inline void scale(ncclDataType_t type, void* buf, size_t count, const void* scalar) {
  dispatch_type(type, [&](auto e) {
    using E = decltype(e);
    auto s = E::load(scalar, 0);
    for (size_t i = 0; i < count; ++i) E::store(buf, i, mul(E::load(buf, i), s));
  });
}

}  // namespace hostnccl
