// The masking rule of what a trace keeps of the command line and environment (text_limits.h),
// as tables: each row an input and what is stored; and how refused settings are echoed.
#include "process/config.h"
#include "process/text_limits.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace ncclwatch;

namespace {

using Args = std::vector<std::string>;

struct ArgsRow {
  Args given;
  Args stored;
};

struct TextRow {
  std::string given;
  std::string stored;
};

}  // namespace

TEST_CASE("command-line arguments: what is masked and what is kept") {
  const ArgsRow rows[] = {
      // --name=value, --name value, name=value
      {{"--db-pass=s1"}, {"--db-pass=***"}},
      {{"--password", "s1"}, {"--password", "***"}},
      {{"--PASSWORD=s1"}, {"--PASSWORD=***"}},
      {{"--passwd", "s1"}, {"--passwd", "***"}},
      {{"--pwd", "s1"}, {"--pwd", "***"}},
      {{"--hf_token", "s1"}, {"--hf_token", "***"}},
      {{"--hftoken=s1"}, {"--hftoken=***"}},
      {{"--api-key=s1"}, {"--api-key=***"}},
      {{"--apikey", "s1"}, {"--apikey", "***"}},
      {{"--apiKey", "s1"}, {"--apiKey", "***"}},
      {{"--key", "s1"}, {"--key", "***"}},
      {{"--auth", "s1"}, {"--auth", "***"}},
      {{"--credentials", "s1"}, {"--credentials", "***"}},
      {{"--credential=s1"}, {"--credential=***"}},
      {{"--client-secret=s1"}, {"--client-secret=***"}},
      {{"--cookie", "s1"}, {"--cookie", "***"}},
      {{"--session-id", "s1"}, {"--session-id", "***"}},
      {{"--private-key", "/home/me/.ssh/id"}, {"--private-key", "***"}},
      {{"-Djavax.net.ssl.keyStorePassword=s1"}, {"-Djavax.net.ssl.keyStorePassword=***"}},
      {{"token=s1"}, {"token=***"}},
      {{"db.password=s1"}, {"db.password=***"}},
      {{"+trainer.api_key=s1"}, {"+trainer.api_key=***"}},
      {{"AWS_SECRET_ACCESS_KEY=s1"}, {"AWS_SECRET_ACCESS_KEY=***"}},
      // -p VALUE is mysql's password flag: masked even where it is a port
      {{"-p", "s1"}, {"-p", "***"}},
      {{"-p=s1"}, {"-p=***"}},
      {{"-P", "3306"}, {"-P", "3306"}},
      {{"-pthread"}, {"-pthread"}},
      // names that merely contain a secret word's letters are kept
      {{"--lr", "0.1"}, {"--lr", "0.1"}},
      {{"--tokenizer", "gpt2"}, {"--tokenizer", "gpt2"}},
      {{"--max-tokens", "512"}, {"--max-tokens", "512"}},
      {{"--passes", "3"}, {"--passes", "3"}},
      {{"--author", "me"}, {"--author", "me"}},
      {{"--keyboard", "us"}, {"--keyboard", "us"}},
      {{"-np", "4"}, {"-np", "4"}},
      {{"lr=0.1"}, {"lr=0.1"}},
      // an option that follows is not a value
      {{"--secret-file", "--other"}, {"--secret-file", "--other"}},
      {{"--token"}, {"--token"}},
      // credentials in URLs, wherever they are
      {{"https://alice:s1@example.com/data"}, {"https://alice:***@example.com/data"}},
      {{"--db=postgres://u:s1@db:5432/x"}, {"--db=postgres://u:***@db:5432/x"}},
      {{"https://ghp_s1@github.com/o/r.git"}, {"https://***@github.com/o/r.git"}},
      {{"a http://u:s1@h1/ b ftp://v:s2@h2"}, {"a http://u:***@h1/ b ftp://v:***@h2"}},
      {{"https://alice:s1@host/p?token=s2"}, {"https://alice:***@host/p?token=***"}},
      {{"--url", "https://alice:s1@host/"}, {"--url", "https://alice:***@host/"}},
      {{"https://example.com/a@b"}, {"https://example.com/a@b"}},
      {{"me@host:/path"}, {"me@host:/path"}},
      {{"s3://bucket/key"}, {"s3://bucket/key"}},
  };
  for (const ArgsRow& row : rows) {
    Args args = row.given;
    mask_secret_arguments(args);
    INFO(row.given[0]);
    CHECK(args == row.stored);
  }
}

TEST_CASE("environment variables: what is masked and what is kept") {
  const TextRow rows[] = {
      {"NCCL_TEST_CLIENT_SECRET=s1", "NCCL_TEST_CLIENT_SECRET=***"},
      {"HF_TOKEN=s1", "HF_TOKEN=***"},
      {"NCCL_PASSWORD=s1", "NCCL_PASSWORD=***"},
      {"NCCL_PASSWD=s1", "NCCL_PASSWD=***"},
      {"NCCL_KEY=s1", "NCCL_KEY=***"},
      {"NCCL_API_KEY=s1", "NCCL_API_KEY=***"},
      {"NCCL_CREDENTIALS=s1", "NCCL_CREDENTIALS=***"},
      {"NCCL_AUTH=s1", "NCCL_AUTH=***"},
      {"NCCL_EMPTY_SECRET=", "NCCL_EMPTY_SECRET=***"},
      // KEY as a part of a word is not a secret: InfiniBand's partition key
      {"NCCL_IB_PKEY=0x8001", "NCCL_IB_PKEY=0x8001"},
      {"NCCL_SOCKET_IFNAME=eth0", "NCCL_SOCKET_IFNAME=eth0"},
      {"TOKENIZERS_PARALLELISM=false", "TOKENIZERS_PARALLELISM=false"},
      {"MASTER_ADDR=10.0.0.1", "MASTER_ADDR=10.0.0.1"},
      {"NCCL_PROXY=http://u:s1@proxy:3128", "NCCL_PROXY=http://u:***@proxy:3128"},
      {"NCCL_ODD", "NCCL_ODD"},
  };
  for (const TextRow& row : rows) {
    INFO(row.given);
    CHECK(masked_environment_entry(row.given) == row.stored);
  }
}

TEST_CASE("stored values are capped, the cut said with the whole length") {
  CHECK(capped_value("short") == "short");
  std::string exact(kMaxStoredValueBytes, 'x');
  CHECK(capped_value(exact) == exact);
  std::string huge(120000, 'x');
  std::string stored = capped_value(huge);
  CHECK(stored.size() <= kMaxStoredValueBytes);
  CHECK(stored.rfind(std::string(1000, 'x'), 0) == 0);
  CHECK(stored.find("120000 bytes") != std::string::npos);
  // Never half a character: "é" is two bytes, the cut falls between them at some length.
  std::string accents;
  while (accents.size() < 2 * kMaxStoredValueBytes) accents += "\xc3\xa9";
  for (size_t shift : {0, 1}) {
    std::string text = std::string(shift, 'a') + accents;
    std::string cut = capped_value(text);
    size_t kept = cut.find("[...cut, ");
    REQUIRE(kept != std::string::npos);
    CHECK((kept - shift) % 2 == 0);
  }
  // An environment entry keeps its name whole; its value is what is capped.
  std::string entry = masked_environment_entry("NCCL_HUGE=" + huge);
  CHECK(entry.rfind("NCCL_HUGE=xxx", 0) == 0);
  CHECK(entry.size() <= kMaxStoredValueBytes + 10);
  CHECK(entry.find("120000 bytes") != std::string::npos);
}

TEST_CASE("text shown on stderr: control and non-ASCII bytes escaped, the length capped") {
  const TextRow rows[] = {
      {"plain", "plain"},
      {"1\x1b[2J\x07", "1\\x1b[2J\\x07"},
      {"tab\there", "tab\\x09here"},
      {"back\\slash", "back\\\\slash"},
      {"\xc3\xa9", "\\xc3\\xa9"},
      {"\x7f", "\\x7f"},
  };
  for (const TextRow& row : rows) CHECK(printable(row.given, 64) == row.stored);
  CHECK(printable(std::string(5000, '9'), 64) == std::string(64, '9') + "... (5000 bytes)");
}

TEST_CASE("a refused setting is echoed escaped and cut") {
  std::vector<std::string> problems;
  std::string hostile = "1\x1b]0;owned\x07" + std::string(1000, '9');
  parse_settings([&](const char* name) { return std::string(name) == "NCCLWATCH_SAMPLE" ? hostile.c_str() : nullptr; },
                 problems);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find('\x1b') == std::string::npos);
  CHECK(problems[0].find('\x07') == std::string::npos);
  CHECK(problems[0].rfind("ncclwatch: NCCLWATCH_SAMPLE=1\\x1b]0;owned\\x07999", 0) == 0);
  CHECK(problems[0].find("(1011 bytes) is not a whole number") != std::string::npos);
  CHECK(problems[0].size() < 200);
}
