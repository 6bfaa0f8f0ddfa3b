// The Python site's text: what the shim writes for the exit alert, and what the reports parse.
#include "python_site.h"

#include "job_model.h"

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
  auto frames = report::parse_python_site("/w/train.py\t43\tmain\nbroken line\n/w/x.py\tNaN\tf\n/w/a b.py\t7\tA.run\n");
  REQUIRE(frames.size() == 2);
  CHECK(frames[0].file == "/w/train.py");
  CHECK(frames[0].line == 43);
  CHECK(frames[0].describe_short() == "train.py:43 (main)");
  CHECK(frames[1].describe() == "/w/a b.py:7 in A.run");
  CHECK(report::parse_python_site("").empty());
}
