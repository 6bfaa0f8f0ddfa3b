// Parquet files written column by column: the format's subset every engine reads (DuckDB, Spark's
// parquet-mr, Arrow, Trino, BigQuery, ClickHouse). Flat schemas of booleans, 32- and 64-bit
// integers, doubles and UTF-8 strings, each column required or nullable; version-1 data pages,
// PLAIN values, strings dictionary-encoded per row group, every page compressed with zstd.
//
// Why our own writer: Debian packages no Arrow or Parquet C++ library, and the reports must not
// depend on a Python environment; the format's subset above is a few hundred lines (the footer is
// Thrift's compact protocol, thrift_compact.h). The same rows always give the same bytes: no
// clock, host or random value goes into a file, so a re-export of the same traces rewrites it
// byte for byte.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ncclwatch::parquet {

enum class Kind : uint8_t { kBool, kInt32, kInt64, kDouble, kString };

struct ColumnSpec {
  std::string name;
  Kind kind = Kind::kInt64;
  bool nullable = false;
};

// The values of one column in the row group being built. Each row adds exactly one value (or
// null, for a nullable column) to every column.
class ColumnData {
 public:
  explicit ColumnData(const ColumnSpec& spec) : spec_(spec) {}
  // Moved, never copied: last_ views a key of this column's own map.
  ColumnData(ColumnData&&) = default;
  ColumnData(const ColumnData&) = delete;
  ColumnData& operator=(const ColumnData&) = delete;

  void add(int64_t v) {
    ints_.push_back(v);
    defined();
  }
  void add(double v) {
    doubles_.push_back(v);
    defined();
  }
  void add(bool v) {
    bools_.push_back(v);
    defined();
  }
  // A string: kept as an index into the row group's dictionary. A run of the same text skips the
  // lookup.
  void add(std::string_view v);
  void add(const char* v) = delete;  // would be add(bool): say std::string_view(v)
  void add_null() {
    if (!spec_.nullable) return add_zero();
    defined_.push_back(0);
    ++rows_;
  }
  // add(v) when present, else null.
  template <class T> void add_optional(bool present, T v) {
    if (present) add(v);
    else add_null();
  }

  const ColumnSpec& spec() const { return spec_; }
  size_t rows() const { return rows_; }

 private:
  friend class TableWriter;
  void defined() {
    if (spec_.nullable) defined_.push_back(1);
    ++rows_;
  }
  void add_zero();  // a required column given no value: its kind's zero
  void clear();

  ColumnSpec spec_;
  size_t rows_ = 0;
  std::vector<int64_t> ints_;
  std::vector<double> doubles_;
  std::vector<uint8_t> bools_;
  std::vector<uint32_t> codes_;                          // strings: dictionary indices
  std::vector<std::string> dictionary_;                  // in first-seen order
  std::unordered_map<std::string, uint32_t> dictionary_index_;
  std::string_view last_;                                // the last string added (a key of the map), and its code
  uint32_t last_code_ = 0;
  bool has_last_ = false;
  std::vector<uint8_t> defined_;                         // nullable: 1 value, 0 null
};

// Rows per row group: DuckDB's own size. A row group's columns are held until it is written; at
// this size they stay in the caches and their memory is reused from one group to the next.
inline constexpr size_t kRowsPerGroup = size_t{1} << 17;

// One Parquet file, written under a hidden temporary name beside `path` (".<name>.tmp-<host>-<pid>",
// which engines listing the folder skip) and renamed over `path` when closed: a reader never sees
// half a file; a failed write leaves nothing. Integer columns carry their minimum, maximum and
// null count per row group, so that engines skip row groups a filter on them rules out.
class TableWriter {
 public:
  // `metadata`: key-value pairs for the footer (the schema's version). Rows are written out as a
  // row group every `rows_per_group` rows.
  TableWriter(std::string path, std::vector<ColumnSpec> schema, std::string created_by,
              std::vector<std::pair<std::string, std::string>> metadata, size_t rows_per_group = kRowsPerGroup);
  ~TableWriter();
  TableWriter(const TableWriter&) = delete;
  TableWriter& operator=(const TableWriter&) = delete;

  ColumnData& operator[](size_t column) { return columns_[column]; }
  // Ends a row: every column must have had its value.
  void end_row() {
    if (++rows_in_group_ >= rows_per_group_) flush_row_group();
  }
  uint64_t rows() const { return rows_written_ + rows_in_group_; }

  // Writes what is left and the footer, and puts the file in place. False (and `error` says why)
  // when anything failed; nothing is left at `path` then.
  bool close(std::string& error);

 private:
  struct ChunkMeta;
  void flush_row_group();
  void write_column_chunk(ColumnData& column, ChunkMeta& meta);
  void write(std::string_view bytes);
  // Compresses a page body into compressed_; page_ is the result.
  const std::string& compress(const std::string& body);

  std::string path_, temp_path_;
  std::vector<ColumnSpec> schema_;
  std::string created_by_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  size_t rows_per_group_;
  std::vector<ColumnData> columns_;
  size_t rows_in_group_ = 0;
  uint64_t rows_written_ = 0;
  int fd_ = -1;
  uint64_t offset_ = 0;
  std::string error_;
  std::string footer_groups_;  // the row groups' metadata, Thrift compact, as they were written
  size_t groups_ = 0;
  void* zstd_ = nullptr;       // ZSTD_CCtx, reused across pages
  std::string scratch_;         // a page body
  std::string compressed_;      // ... compressed
  std::string_view page_;
  std::vector<int32_t> narrowed_;  // an INT32 column's values
};

}  // namespace ncclwatch::parquet
