// Short function names for one-line reports: "ns::fn" from "ns::fn(int, char const*) const".
#pragma once

#include <string>
#include <string_view>

namespace ncclwatch {

// Cuts a demangled name at its parameter list: the first '(' outside template arguments,
// lambda braces and brackets, past an operator's own symbol, so that "Foo::operator()(int) const"
// keeps "Foo::operator()" and "main::{lambda(int)#1}::operator()(int) const" keeps its lambda.
inline std::string drop_parameters(std::string name) {
  // A constant, not a static std::string: exit() destroys statics while other threads may still
  // be capturing call sites.
  constexpr std::string_view kAnonymous = "(anonymous namespace)";
  for (size_t at = name.find(kAnonymous); at != std::string::npos; at = name.find(kAnonymous))
    name.replace(at, kAnonymous.size(), "{anon}");
  constexpr std::string_view kOperator = "operator";
  constexpr std::string_view kOperatorSymbols = "<>=!+-*/%^&|~[],";
  int depth = 0;  // inside <>, {} or []
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (depth == 0 && name.compare(i, kOperator.size(), kOperator) == 0 &&
        (i == 0 || name[i - 1] == ':' || name[i - 1] == ' ')) {
      i += kOperator.size();
      if (name.compare(i, 2, "()") == 0) ++i;  // operator(): its "()" is the name
      else
        while (i < name.size() && kOperatorSymbols.find(name[i]) != std::string_view::npos) ++i;
      --i;
      continue;
    }
    if (c == '<' || c == '{' || c == '[') ++depth;
    else if ((c == '>' || c == '}' || c == ']') && depth > 0) --depth;
    else if (c == '(' && depth == 0 && i > 0) {
      name.resize(i);
      break;
    } else if (c == '(') {  // parentheses inside template arguments or lambdas: skip to the match
      int parens = 1;
      while (++i < name.size() && parens > 0) parens += name[i] == '(' ? 1 : name[i] == ')' ? -1 : 0;
      --i;
    }
  }
  return name;
}

}  // namespace ncclwatch
