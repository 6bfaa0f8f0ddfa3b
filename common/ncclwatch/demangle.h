// Short function names for one-line reports: "ns::fn" from "ns::fn(int, char const*) const".
#pragma once

#include <string>
#include <string_view>

namespace ncclwatch {

inline std::string drop_parameters(std::string name) {
  // A constant, not a static std::string: exit() destroys statics while other threads may still
  // be capturing call sites.
  constexpr std::string_view kAnonymous = "(anonymous namespace)";
  for (size_t at = name.find(kAnonymous); at != std::string::npos; at = name.find(kAnonymous))
    name.replace(at, kAnonymous.size(), "{anon}");
  if (size_t paren = name.find('('); paren != std::string::npos && paren > 0) name.resize(paren);
  return name;
}

}  // namespace ncclwatch
