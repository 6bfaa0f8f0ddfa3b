// The Parquet writer (table_writer.h). Layout of a file: "PAR1", then per row group one column chunk
// per column (an optional dictionary page, then one data page), then the footer (FileMetaData,
// Thrift compact), its length and "PAR1". The structures and their field ids are those of
// parquet-format's parquet.thrift.
#include "parquet/table_writer.h"

#include "parquet/thrift_compact.h"

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ncclwatch::parquet {
namespace {

// parquet.thrift's enums.
enum PhysicalType : int32_t { kBoolean = 0, kInt32 = 1, kInt64 = 2, kDoubleType = 5, kByteArray = 6 };
enum Encoding : int32_t { kPlain = 0, kPlainDictionary = 2, kRle = 3 };
enum PageType : int32_t { kDataPage = 0, kDictionaryPage = 2 };
constexpr int32_t kRequired = 0, kOptional = 1;
constexpr int32_t kConvertedUtf8 = 0;
constexpr int32_t kZstd = 6;
constexpr int kZstdLevel = 1;  // the fastest: most columns are runs, which any level shrinks

PhysicalType physical(Kind kind) {
  switch (kind) {
    case Kind::kBool: return kBoolean;
    case Kind::kInt32: return kInt32;
    case Kind::kInt64: return kInt64;
    case Kind::kDouble: return kDoubleType;
    case Kind::kString: return kByteArray;
  }
  return kInt64;
}

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

// Appends `count` values of `values` as they lie in memory (little-endian hosts only: x86-64, arm64).
template <class T> void put_raw(std::string& out, const T* values, size_t count) {
  if (count == 0) return;  // an empty vector's data() may be null, which memcpy must never get
  size_t start = out.size();
  out.resize(start + sizeof(T) * count);
  std::memcpy(out.data() + start, values, sizeof(T) * count);
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// The RLE/bit-packing hybrid, as runs only: each run is its length and one value of `bit_width`
// bits in whole bytes. Definition levels and dictionary indices repeat in long runs.
template <class T> void put_runs(std::string& out, const std::vector<T>& values, int bit_width) {
  int value_bytes = (bit_width + 7) / 8;
  for (size_t i = 0; i < values.size();) {
    size_t j = i + 1;
    while (j < values.size() && values[j] == values[i]) ++j;
    put_varint(out, static_cast<uint64_t>(j - i) << 1);
    put_le(out, values[i], value_bytes);
    i = j;
  }
}

void page_header(thrift::CompactWriter& w, int32_t type, size_t uncompressed, size_t compressed) {
  w.i32(1, type);
  w.i32(2, static_cast<int32_t>(uncompressed));
  w.i32(3, static_cast<int32_t>(compressed));
}

}  // namespace

void ColumnData::add(std::string_view v) {
  if (!(has_last_ && v == last_)) {
    auto [it, inserted] = dictionary_index_.try_emplace(std::string(v), static_cast<uint32_t>(dictionary_.size()));
    if (inserted) dictionary_.push_back(it->first);
    last_ = it->first;  // the map's key: a node's key never moves
    last_code_ = it->second;
    has_last_ = true;
  }
  codes_.push_back(last_code_);
  defined();
}

void ColumnData::add_zero() {
  switch (spec_.kind) {
    case Kind::kBool: return add(false);
    case Kind::kInt32:
    case Kind::kInt64: return add(int64_t{0});
    case Kind::kDouble: return add(0.0);
    case Kind::kString: return add(std::string_view());
  }
}

void ColumnData::clear() {
  rows_ = 0;
  ints_.clear();
  doubles_.clear();
  bools_.clear();
  codes_.clear();
  dictionary_.clear();
  dictionary_index_.clear();
  has_last_ = false;
  defined_.clear();
}

struct TableWriter::ChunkMeta {
  uint64_t dictionary_offset = 0, data_offset = 0;
  bool has_dictionary = false;
  uint64_t uncompressed = 0, compressed = 0;
  // Integer columns: the statistics (PLAIN-encoded min and max of the values present).
  bool has_range = false;
  int64_t min = 0, max = 0;
  uint64_t nulls = 0;
};

TableWriter::TableWriter(std::string path, std::vector<ColumnSpec> schema, std::string created_by,
                         std::vector<std::pair<std::string, std::string>> metadata, size_t rows_per_group)
    : path_(std::move(path)), schema_(std::move(schema)), created_by_(std::move(created_by)),
      metadata_(std::move(metadata)), rows_per_group_(rows_per_group ? rows_per_group : 1) {
  for (const ColumnSpec& c : schema_) columns_.emplace_back(c);
  // Host and pid: writers on several nodes may share the folder.
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  for (char* c = host; *c; ++c)
    if (*c == '/') *c = '_';
  size_t slash = path_.rfind('/');
  size_t name_at = slash == std::string::npos ? 0 : slash + 1;
  temp_path_ = path_.substr(0, name_at) + "." + path_.substr(name_at) + ".tmp-" + host + "-" + std::to_string(::getpid());
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) {
    error_ = "cannot create " + temp_path_ + ": " + std::strerror(errno);
    return;
  }
  zstd_ = ZSTD_createCCtx();
  write("PAR1");
}

TableWriter::~TableWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_path_.c_str());
  }
  ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(zstd_));
}

void TableWriter::write(std::string_view bytes) {
  if (fd_ < 0 || !error_.empty()) return;
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error_ = "writing " + temp_path_ + " failed: " + std::strerror(n < 0 ? errno : ENOSPC);
      return;
    }
    done += static_cast<size_t>(n);
  }
  offset_ += bytes.size();
}

const std::string& TableWriter::compress(const std::string& body) {
  // One buffer for every page: a fresh one per page would cost its pages' first touch each time.
  compressed_.resize(std::max(compressed_.size(), ZSTD_compressBound(body.size())));
  size_t n = ZSTD_compressCCtx(static_cast<ZSTD_CCtx*>(zstd_), compressed_.data(), compressed_.size(), body.data(),
                               body.size(), kZstdLevel);
  if (ZSTD_isError(n)) {
    if (error_.empty()) error_ = std::string("zstd: ") + ZSTD_getErrorName(n);
    n = 0;
  }
  page_ = std::string_view(compressed_.data(), n);
  return compressed_;
}

void TableWriter::write_column_chunk(ColumnData& c, ChunkMeta& meta) {
  auto write_page = [&](int32_t type, const std::string& body, auto&& page_specific) {
    if (body.size() > static_cast<size_t>(INT32_MAX) && error_.empty())
      error_ = "a page of column " + c.spec_.name + " would exceed 2 GiB";
    compress(body);
    std::string_view compressed = page_;
    thrift::CompactWriter w;
    page_header(w, type, body.size(), compressed.size());
    page_specific(w);
    w.end();
    meta.uncompressed += w.out().size() + body.size();
    meta.compressed += w.out().size() + compressed.size();
    write(w.out());
    write(compressed);
  };
  std::string& body = scratch_;
  body.clear();
  if (c.spec_.kind == Kind::kString) {
    for (const std::string& s : c.dictionary_) {
      put_le(body, s.size(), 4);
      body += s;
    }
    meta.has_dictionary = true;
    meta.dictionary_offset = offset_;
    write_page(kDictionaryPage, body, [&](thrift::CompactWriter& w) {
      w.begin_struct(7);  // DictionaryPageHeader
      w.i32(1, static_cast<int32_t>(c.dictionary_.size()));
      w.i32(2, kPlainDictionary);
      w.end_struct();
    });
    body.clear();
  }
  meta.data_offset = offset_;
  meta.nulls = c.rows_ - (c.spec_.kind == Kind::kString ? c.codes_.size()
                          : c.spec_.kind == Kind::kDouble ? c.doubles_.size()
                          : c.spec_.kind == Kind::kBool   ? c.bools_.size()
                                                          : c.ints_.size());
  if ((c.spec_.kind == Kind::kInt32 || c.spec_.kind == Kind::kInt64) && !c.ints_.empty()) {
    auto [lo, hi] = std::minmax_element(c.ints_.begin(), c.ints_.end());
    meta.has_range = true;
    meta.min = *lo;
    meta.max = *hi;
  }
  if (c.spec_.nullable) {
    std::string levels;
    put_runs(levels, c.defined_, 1);
    put_le(body, levels.size(), 4);
    body += levels;
  }
  switch (c.spec_.kind) {
    case Kind::kBool: {
      size_t start = body.size();
      body.resize(start + (c.bools_.size() + 7) / 8, '\0');
      for (size_t i = 0; i < c.bools_.size(); ++i)
        if (c.bools_[i]) body[start + i / 8] = static_cast<char>(body[start + i / 8] | (1 << (i % 8)));
      break;
    }
    case Kind::kInt32: {
      narrowed_.resize(c.ints_.size());
      for (size_t i = 0; i < c.ints_.size(); ++i) narrowed_[i] = static_cast<int32_t>(c.ints_[i]);
      put_raw(body, narrowed_.data(), narrowed_.size());
      break;
    }
    case Kind::kInt64:
      put_raw(body, c.ints_.data(), c.ints_.size());
      break;
    case Kind::kDouble:
      put_raw(body, c.doubles_.data(), c.doubles_.size());
      break;
    case Kind::kString: {
      int bit_width = std::max(1, static_cast<int>(std::bit_width(c.dictionary_.empty() ? 0u : c.dictionary_.size() - 1)));
      body.push_back(static_cast<char>(bit_width));
      put_runs(body, c.codes_, bit_width);
      break;
    }
  }
  bool dictionary = c.spec_.kind == Kind::kString;
  write_page(kDataPage, body, [&](thrift::CompactWriter& w) {
    w.begin_struct(5);  // DataPageHeader
    w.i32(1, static_cast<int32_t>(c.rows_));
    w.i32(2, dictionary ? kPlainDictionary : kPlain);
    w.i32(3, kRle);
    w.i32(4, kRle);
    w.end_struct();
  });
}

void TableWriter::flush_row_group() {
  if (rows_in_group_ == 0) return;
  for (const ColumnData& c : columns_)
    if (c.rows_ != rows_in_group_ && error_.empty())  // a caller's mistake: the file would be corrupt
      error_ = "column " + c.spec_.name + " has " + std::to_string(c.rows_) + " values for " +
               std::to_string(rows_in_group_) + " rows";
  if (fd_ < 0 || !error_.empty()) {  // nothing more can be written: hold no rows either
    for (ColumnData& c : columns_) c.clear();
    rows_in_group_ = 0;
    return;
  }
  thrift::CompactWriter group;  // RowGroup
  group.begin_list(1, thrift::kStruct, columns_.size());
  uint64_t total_uncompressed = 0;
  for (ColumnData& c : columns_) {
    ChunkMeta meta;
    uint64_t chunk_start = offset_;
    write_column_chunk(c, meta);
    total_uncompressed += meta.uncompressed;
    group.begin_element();  // ColumnChunk
    group.i64(2, static_cast<int64_t>(chunk_start));
    group.begin_struct(3);  // ColumnMetaData
    group.i32(1, physical(c.spec_.kind));
    group.begin_list(2, thrift::kI32, 2);  // the values' encoding, and the levels'
    group.list_i32(meta.has_dictionary ? kPlainDictionary : kPlain);
    group.list_i32(kRle);
    group.begin_list(3, thrift::kBinary, 1);
    group.list_binary(c.spec_.name);
    group.i32(4, kZstd);
    group.i64(5, static_cast<int64_t>(c.rows_));
    group.i64(6, static_cast<int64_t>(meta.uncompressed));
    group.i64(7, static_cast<int64_t>(meta.compressed));
    group.i64(9, static_cast<int64_t>(meta.data_offset));
    if (meta.has_dictionary) group.i64(11, static_cast<int64_t>(meta.dictionary_offset));
    group.begin_struct(12);  // Statistics
    group.i64(3, static_cast<int64_t>(meta.nulls));
    if (meta.has_range) {
      int bytes = c.spec_.kind == Kind::kInt32 ? 4 : 8;
      std::string max, min;
      put_le(max, static_cast<uint64_t>(meta.max), bytes);
      put_le(min, static_cast<uint64_t>(meta.min), bytes);
      group.binary(5, max);  // max_value, min_value: signed order, as INT32 and INT64 sort
      group.binary(6, min);
    }
    group.end_struct();
    group.end_struct();
    group.end_struct();
    c.clear();
  }
  group.i64(2, static_cast<int64_t>(total_uncompressed));
  group.i64(3, static_cast<int64_t>(rows_in_group_));
  group.end();
  footer_groups_ += group.out();
  ++groups_;
  rows_written_ += rows_in_group_;
  rows_in_group_ = 0;
}

bool TableWriter::close(std::string& error) {
  flush_row_group();
  thrift::CompactWriter meta;  // FileMetaData
  meta.i32(1, 1);
  meta.begin_list(2, thrift::kStruct, schema_.size() + 1);
  meta.begin_element();  // the root: a group of the columns
  meta.binary(4, "schema");
  meta.i32(5, static_cast<int32_t>(schema_.size()));
  meta.end_struct();
  for (const ColumnSpec& c : schema_) {
    meta.begin_element();
    meta.i32(1, physical(c.kind));
    meta.i32(3, c.nullable ? kOptional : kRequired);
    meta.binary(4, c.name);
    if (c.kind == Kind::kString) {
      meta.i32(6, kConvertedUtf8);
      meta.begin_struct(10);  // LogicalType: STRING
      meta.begin_struct(1);
      meta.end_struct();
      meta.end_struct();
    }
    meta.end_struct();
  }
  meta.i64(3, static_cast<int64_t>(rows_written_));
  meta.begin_list(4, thrift::kStruct, groups_);
  meta.raw(footer_groups_);
  meta.begin_list(5, thrift::kStruct, metadata_.size());
  for (const auto& [key, value] : metadata_) {
    meta.begin_element();
    meta.binary(1, key);
    meta.binary(2, value);
    meta.end_struct();
  }
  meta.binary(6, created_by_);
  meta.end();
  std::string tail = meta.out();
  put_le(tail, meta.out().size(), 4);
  tail += "PAR1";
  write(tail);
  if (fd_ >= 0 && ::close(fd_) != 0 && error_.empty()) error_ = "writing " + temp_path_ + " failed: " + std::strerror(errno);
  fd_ = -1;
  if (error_.empty() && std::rename(temp_path_.c_str(), path_.c_str()) != 0)
    error_ = "cannot put " + path_ + " in place: " + std::strerror(errno);
  if (!error_.empty()) {
    ::unlink(temp_path_.c_str());
    error = error_;
    return false;
  }
  return true;
}

}  // namespace ncclwatch::parquet
