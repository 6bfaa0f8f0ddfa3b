// How the findings and the reports word what they name (wording.h).
#include "model/wording.h"

#include <fmt/format.h>

namespace ncclwatch::model {

using nlohmann::json;

std::map<uint64_t, std::string> comm_names(const Job& job) {
  std::map<uint64_t, std::string> names;
  for (const ProcessTrace& p : job.processes)
    for (const CommInstance& c : p.comms)
      if (!c.known_name().empty()) names.emplace(c.id, c.known_name());
  return names;
}

std::string comm_label(uint64_t id, const std::map<uint64_t, std::string>& names) {
  auto it = names.find(id);
  if (it != names.end() && !it->second.empty()) return fmt::format("\"{}\" ({})", it->second, hex_id(id));
  return hex_id(id);
}

std::string ranks_text(const std::vector<int32_t>& ranks, size_t limit) {
  std::string out;
  size_t pieces = 0;
  for (size_t i = 0; i < ranks.size(); ++pieces) {
    size_t end = i + 1;  // one past the run of consecutive ranks starting at i
    while (end < ranks.size() && ranks[end] == ranks[end - 1] + 1) ++end;
    if (pieces == limit) {
      out += fmt::format(",... ({} ranks)", ranks.size());
      break;
    }
    if (end - i >= 3) {
      out += fmt::format("{}{}-{}", out.empty() ? "" : ",", ranks[i], ranks[end - 1]);
      i = end;
    } else {
      out += fmt::format("{}{}", out.empty() ? "" : ",", ranks[i]);
      ++i;
    }
  }
  return out;
}

uint64_t rank_count(const std::vector<RankRange>& ranges) {
  uint64_t n = 0;
  for (const RankRange& r : ranges) n += static_cast<uint64_t>(r.last - r.first) + 1;
  return n;
}

std::string ranges_text(const std::vector<RankRange>& ranges, size_t limit) {
  std::string out;
  for (size_t i = 0; i < ranges.size() && i < limit; ++i) {
    const RankRange& r = ranges[i];
    if (i) out += ',';
    out += r.first == r.last ? std::to_string(r.first) : fmt::format("{}-{}", r.first, r.last);
  }
  if (ranges.size() > limit) out += fmt::format(",... ({} ranks)", rank_count(ranges));
  return out;
}

std::string dump_json(const json& j, int indent) { return j.dump(indent, ' ', false, json::error_handler_t::replace); }

}  // namespace ncclwatch::model
