// What a trace keeps of the command line and the environment (README, "What a trace holds"):
//
//  - A name looks secret when one of its words (split at anything not a letter or digit, and
//    where camelCase turns upper) is key, token, auth, oauth, bearer, pass, pw, pwd, creds,
//    cookie(s), session, private, authorization or authentication, or holds password, passwd,
//    passphrase, secret or credential, or ends in token, apikey, accesskey or privatekey
//    (hftoken, dbpassword, clientsecret). Short words count whole only: --tokenizer,
//    --max-tokens, --passes, --author, NCCL_IB_PKEY (InfiniBand's partition key) and
//    TOKENIZERS_PARALLELISM are kept.
//  - Command line: the value of a secret-named option becomes *** in every form: `--name=VALUE`,
//    `--name VALUE` (when VALUE does not start with '-'), `name=VALUE` (hydra-style overrides,
//    `-Dname=VALUE`). `-p VALUE` and `-p=VALUE` too: -p is the password flag of mysql-style tools,
//    and a port number lost where it meant a port costs less than a password kept. The attached
//    `-pVALUE` is kept: it cannot be told from flags like -pthread.
//  - URLs anywhere in an argument or a stored variable: `scheme://user:PASS@host` keeps the user
//    (`scheme://user:***@host`); a user part without ':' is often a token by itself
//    (`https://TOKEN@github.com`) and becomes ***.
//  - Environment: only the variables process_info.cc keeps (NCCL_*, job ids, ...); a secret-named
//    one's value becomes *** (NCCL_CLIENT_SECRET=***).
//  - Every stored value is capped at kMaxStoredValueBytes, with "[...cut, N bytes in all]".
//  NCCLWATCH_FULL_CMDLINE=1 keeps the command line verbatim (still capped); the environment is
//  masked all the same.
#include "process/text_limits.h"

#include <algorithm>
#include <cstdio>

namespace ncclwatch {
namespace {

constexpr std::string_view kMask = "***";

// ASCII only, whatever the application's locale says.
bool is_lower(char c) { return c >= 'a' && c <= 'z'; }
bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }
bool is_alpha(char c) { return is_lower(c) || is_upper(c); }
bool is_alnum(char c) { return is_alpha(c) || (c >= '0' && c <= '9'); }
char to_lower(char c) { return is_upper(c) ? static_cast<char>(c - 'A' + 'a') : c; }

bool ends_with(std::string_view text, std::string_view tail) {
  return text.size() >= tail.size() && text.substr(text.size() - tail.size()) == tail;
}

bool word_is_secret(std::string_view word) {
  for (std::string_view w : {"key", "token", "auth", "oauth", "bearer", "pass", "pw", "pwd", "creds", "cookie", "cookies",
                             "session", "private", "authorization", "authentication"})
    if (word == w) return true;
  for (std::string_view stem : {"password", "passwd", "passphrase", "secret", "credential"})
    if (word.find(stem) != std::string_view::npos) return true;
  for (std::string_view tail : {"token", "apikey", "accesskey", "privatekey"})
    if (ends_with(word, tail)) return true;
  return false;
}

// The short flag whose value is a password in mysql-style tools.
bool is_short_password_flag(std::string_view option) { return option == "-p"; }

// An option's name without its leading '-' or '+' (`+trainer.api_key=...` is a hydra override).
std::string_view bare_name(std::string_view option) {
  size_t start = option.find_first_not_of("-+");
  return start == std::string_view::npos ? std::string_view() : option.substr(start);
}

bool option_names_a_secret(std::string_view option) {
  return is_short_password_flag(option) || name_looks_secret(bare_name(option));
}

// Where a URL's authority ends: at its path, query, fragment, or anything a URL cannot hold.
size_t authority_end(std::string_view text, size_t start) {
  size_t at = start;
  while (at < text.size()) {
    char c = text[at];
    if (c == '/' || c == '?' || c == '#' || c == '"' || c == '\'' || c == ' ' || static_cast<unsigned char>(c) < 0x20)
      break;
    ++at;
  }
  return at;
}

// Whether `text[start, end)` is a URL scheme: a letter, then letters, digits, '+', '-' or '.'.
bool is_scheme(std::string_view text, size_t start, size_t end) {
  if (start == end || !is_alpha(text[start])) return false;
  for (size_t i = start; i < end; ++i)
    if (!is_alnum(text[i]) && text[i] != '+' && text[i] != '-' && text[i] != '.') return false;
  return true;
}

}  // namespace

bool name_looks_secret(std::string_view name) {
  std::string word;
  auto flush = [&word] {
    bool secret = !word.empty() && word_is_secret(word);
    word.clear();
    return secret;
  };
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (!is_alnum(c)) {
      if (flush()) return true;
      continue;
    }
    // camelCase: apiKey, keyStorePassword.
    if (is_upper(c) && i > 0 && is_lower(name[i - 1]) && flush()) return true;
    word += to_lower(c);
  }
  return flush();
}

std::string mask_url_credentials(std::string_view text) {
  std::string out;
  size_t copied = 0;
  for (size_t from = 0, sep; (sep = text.find("://", from)) != std::string_view::npos;) {
    from = sep + 3;
    size_t scheme_start = sep;
    while (scheme_start > 0 && (is_alnum(text[scheme_start - 1]) || text[scheme_start - 1] == '+' ||
                                text[scheme_start - 1] == '-' || text[scheme_start - 1] == '.'))
      --scheme_start;
    if (!is_scheme(text, scheme_start, sep)) continue;
    size_t user_start = sep + 3;
    size_t end = authority_end(text, user_start);
    // The last '@' of the authority ends its user part (a password may hold '@').
    size_t at = text.substr(0, end).rfind('@');
    if (at == std::string_view::npos || at < user_start) continue;
    size_t colon = text.substr(0, at).find(':', user_start);
    // user:PASS keeps the user; a user part alone may be a token.
    size_t secret_start = colon != std::string_view::npos ? colon + 1 : user_start;
    out.append(text, copied, secret_start - copied);
    out += kMask;
    copied = at;
    from = end;
  }
  out.append(text, copied);
  return out;
}

void mask_secret_arguments(std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string& arg = args[i];
    // URLs first: a query's `token=` masks what follows it, not the user part before.
    if (arg.find("://") != std::string::npos) arg = mask_url_credentials(arg);
    size_t equals = arg.find('=');
    if (equals != std::string::npos && equals > 0) {
      if (option_names_a_secret(std::string_view(arg).substr(0, equals))) arg.replace(equals + 1, std::string::npos, kMask);
    } else if (arg.size() >= 2 && arg[0] == '-' && option_names_a_secret(arg)) {
      // `--name VALUE`: an option next is not a value.
      if (i + 1 < args.size() && (args[i + 1].empty() || args[i + 1][0] != '-')) args[++i] = kMask;
    }
  }
}

std::string masked_environment_entry(std::string_view entry) {
  size_t equals = entry.find('=');
  if (equals == std::string_view::npos) return capped_value(entry);
  std::string_view name = entry.substr(0, equals);
  std::string out(name);
  out += '=';
  if (name_looks_secret(name)) out += kMask;
  else out += capped_value(mask_url_credentials(entry.substr(equals + 1)));
  return out;
}

std::string capped_value(std::string_view value, size_t max_bytes) {
  if (value.size() <= max_bytes) return std::string(value);
  std::string marker = "[...cut, " + std::to_string(value.size()) + " bytes in all]";
  size_t room = max_bytes > marker.size() ? max_bytes - marker.size() : 0;
  std::string out(value.substr(0, utf8_prefix_length(value, room)));
  out += marker;
  return out;
}

std::string printable(std::string_view text, size_t max_bytes) {
  std::string out;
  std::string_view shown = text.substr(0, std::min(text.size(), max_bytes));
  for (char c : shown) {
    unsigned char byte = static_cast<unsigned char>(c);
    if (c == '\\') {
      out += "\\\\";
    } else if (byte < 0x20 || byte >= 0x7f) {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  if (shown.size() < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace ncclwatch
