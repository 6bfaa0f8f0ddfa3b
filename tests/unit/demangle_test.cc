// Short names of demangled C++ functions, as leak sites and alerts show them.
#include <ncclwatch/demangle.h>

#include <catch2/catch.hpp>

using ncclwatch::drop_parameters;

TEST_CASE("a function's parameters are dropped, its name kept whole") {
  CHECK(drop_parameters("ns::fn(int, char const*) const") == "ns::fn");
  CHECK(drop_parameters("plain") == "plain");
  CHECK(drop_parameters("(anonymous namespace)::setup(int)") == "{anon}::setup");
  CHECK(drop_parameters("c10d::ProcessGroupNCCL::initNCCLComm(std::string const&, c10::Device&)") ==
        "c10d::ProcessGroupNCCL::initNCCLComm");
}

TEST_CASE("operators keep their own symbol") {
  CHECK(drop_parameters("Foo::operator()(int) const") == "Foo::operator()");
  CHECK(drop_parameters("operator<<(std::ostream&, Foo const&)") == "operator<<");
  CHECK(drop_parameters("Foo::operator<(Foo const&) const") == "Foo::operator<");
  CHECK(drop_parameters("Foo::operator->() const") == "Foo::operator->");
  CHECK(drop_parameters("operator new(unsigned long)") == "operator new");
  CHECK(drop_parameters("operator delete[](void*)") == "operator delete[]");
}

TEST_CASE("lambdas and template arguments are not cut inside") {
  CHECK(drop_parameters("main::{lambda(int)#1}::operator()(int) const") == "main::{lambda(int)#1}::operator()");
  CHECK(drop_parameters("std::function<void (int)>::operator()(int) const") == "std::function<void (int)>::operator()");
  CHECK(drop_parameters("run<Worker, (Mode)2>(Worker&)") == "run<Worker, (Mode)2>");
  CHECK(drop_parameters("std::vector<int, std::allocator<int> >::push_back(int&&)") ==
        "std::vector<int, std::allocator<int> >::push_back");
}
