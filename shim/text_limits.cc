#include "text_limits.h"

#include <algorithm>
#include <cctype>

namespace ncclwatch {
namespace {

bool names_a_secret(std::string_view option) {
  std::string lower(option);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (std::string_view word : {"key", "token", "secret", "password", "passwd"})
    if (lower.find(word) != std::string::npos) return true;
  return false;
}

}  // namespace

void mask_secret_arguments(std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string& arg = args[i];
    if (arg.size() < 2 || arg[0] != '-') continue;
    size_t equals = arg.find('=');
    if (!names_a_secret(std::string_view(arg).substr(0, equals))) continue;
    if (equals != std::string::npos) arg.replace(equals + 1, std::string::npos, "***");
    else if (i + 1 < args.size() && (args[i + 1].empty() || args[i + 1][0] != '-')) args[++i] = "***";
  }
}

}  // namespace ncclwatch
