// How the findings and the reports word what they name: communicators by the names the
// application gave them, ranks as people read them ("0,1,4-63"), JSON text that never aborts.
#pragma once

#include "model/job_model.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ncclwatch::model {

// Communicator identity -> the name the application gave it (config->commName), where it did.
std::map<uint64_t, std::string> comm_names(const Job& job);
// "\"name\" (id)" or the id.
std::string comm_label(uint64_t id, const std::map<uint64_t, std::string>& names);

// Ranks as people read them: "0,1,4-63" (three or more in a row become a range), at most `limit`
// pieces, then how many ranks in all. `ranks` is sorted.
std::string ranks_text(const std::vector<int32_t>& ranks, size_t limit = 16);

// The JSON text of `j` (indent < 0: one line). Strings are valid UTF-8 from the reader on; should
// one not be, it shows U+FFFD rather than aborting the report (nlohmann::json throws otherwise).
std::string dump_json(const nlohmann::json& j, int indent = -1);

// Ranges of ranks, inclusive: how a finding about thousands of ranks stays short.
struct RankRange {
  int32_t first = 0, last = 0;  // inclusive
};
uint64_t rank_count(const std::vector<RankRange>& ranges);
// "0,3-5,9": at most `limit` ranges, then how many ranks in all.
std::string ranges_text(const std::vector<RankRange>& ranges, size_t limit = 16);
}  // namespace ncclwatch::model
