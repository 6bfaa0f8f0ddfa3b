// Thrift's compact protocol, the encoding of Parquet's page headers and footer: only writing,
// only the types those structures use. Fields are written in increasing id order within a struct
// (the protocol stores the id as a delta from the previous one).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ncclwatch::parquet::thrift {

enum Type : uint8_t { kTrue = 1, kFalse = 2, kI32 = 5, kI64 = 6, kBinary = 8, kList = 9, kStruct = 12 };

class CompactWriter {
 public:
  std::string& out() { return out_; }

  void i32(int16_t id, int32_t v) {
    field(id, kI32);
    varint(zigzag(v));
  }
  void i64(int16_t id, int64_t v) {
    field(id, kI64);
    varint(zigzag(v));
  }
  void binary(int16_t id, std::string_view v) {
    field(id, kBinary);
    raw_binary(v);
  }
  // A struct field: begin_struct(id), its fields, end_struct().
  void begin_struct(int16_t id) {
    field(id, kStruct);
    push();
  }
  void end_struct() {
    out_.push_back(0);  // stop
    last_.pop_back();
  }
  // A list field, then its `size` elements: list_i32 / list_binary values, or structs each between
  // begin_element() and end_struct().
  void begin_list(int16_t id, Type element, size_t size) {
    field(id, kList);
    if (size < 15) {
      out_.push_back(static_cast<char>((size << 4) | element));
    } else {
      out_.push_back(static_cast<char>(0xF0 | element));
      varint(size);
    }
  }
  void list_i32(int32_t v) { varint(zigzag(v)); }
  void list_binary(std::string_view v) { raw_binary(v); }
  void begin_element() { push(); }
  // Bytes of structs encoded on their own (each with its own stop), as list elements.
  void raw(std::string_view bytes) { out_.append(bytes); }
  // The outermost struct's stop.
  void end() { out_.push_back(0); }

 private:
  static uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
  void varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  void raw_binary(std::string_view v) {
    varint(v.size());
    out_.append(v);
  }
  void field(int16_t id, Type type) {
    int16_t delta = static_cast<int16_t>(id - last_.back());
    if (delta > 0 && delta <= 15) {
      out_.push_back(static_cast<char>((delta << 4) | type));
    } else {
      out_.push_back(static_cast<char>(type));
      varint(zigzag(id));
    }
    last_.back() = id;
  }
  void push() { last_.push_back(0); }

  std::string out_;
  std::vector<int16_t> last_{0};  // the last field id written, per open struct
};

}  // namespace ncclwatch::parquet::thrift
