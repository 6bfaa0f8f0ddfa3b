// The Python site's text: what the shim writes for the exit alert, and what the reports parse.
#include "site/python_site.h"

#include "model/job_model.h"

#include <catch2/catch.hpp>

#include <string>

using namespace ncclwatch;

TEST_CASE("the alert's short Python site is the innermost frame's file, line and function") {
  char out[128];
  short_python_site("/jobs/train.py\t43\tmake_groups\n/jobs/run.py\t9\t<module>\n", out, sizeof(out));
  CHECK(std::string(out) == "train.py:43 (make_groups)");
  short_python_site("", out, sizeof(out));
  CHECK(std::string(out).empty());
  short_python_site("no tabs at all\n", out, sizeof(out));
  CHECK(std::string(out).empty());
  char small[12];
  short_python_site("/a/b/train.py\t43\tmake_groups\n", small, sizeof(small));
  CHECK(std::string(small) == "train.py:43");  // cut to fit, NUL-terminated
}

TEST_CASE("reports read the Python site and skip lines they cannot read") {
  auto frames = model::parse_python_site("/w/train.py\t43\tmain\nbroken line\n/w/x.py\tNaN\tf\n/w/a b.py\t7\tA.run\n");
  REQUIRE(frames.size() == 2);
  CHECK(frames[0].file == "/w/train.py");
  CHECK(frames[0].line == 43);
  CHECK(frames[0].describe_short() == "train.py:43 (main)");
  CHECK(frames[1].describe() == "/w/a b.py:7 in A.run");
  CHECK(model::parse_python_site("").empty());
}

TEST_CASE("PyTorch's process group, after the frames, reads the same in the alert and the reports") {
  const char* site = "/w/train.py\t43\tmain\nprocess_group\t\t3\ttensor_parallel\n";
  char out[96];
  process_group_text(site, out, sizeof(out));
  CHECK(std::string(out) == "process group 3 \"tensor_parallel\"");
  model::ProcessGroupName group = model::parse_process_group(site);
  CHECK(group.name == "3");
  CHECK(group.desc == "tensor_parallel");
  CHECK(group.describe() == out);
  // The frames are unchanged by it: its empty line field is no frame's.
  CHECK(model::parse_python_site(site).size() == 1);
  // new_group() without a description: PyTorch says "undefined", and so do we not.
  const char* undescribed = "/w/train.py\t9\tf\nprocess_group\t\t5\tundefined\n";
  process_group_text(undescribed, out, sizeof(out));
  CHECK(std::string(out) == "process group 5");
  CHECK(model::parse_process_group(undescribed).describe() == "process group 5");
  // None, or the words inside another line: no group.
  process_group_text("/w/train.py\t43\tmain\n", out, sizeof(out));
  CHECK(std::string(out).empty());
  process_group_text("/w/xprocess_group\t\t3\tx\n", out, sizeof(out));
  CHECK(std::string(out).empty());
  CHECK(model::parse_process_group("/w/xprocess_group\t\t3\tx\n").empty());
}
