#include <catch2/catch.hpp>

#include "dedloc/plan/units.hpp"

using namespace dedloc::plan;

TEST_CASE("rates accept bits, bytes and binary prefixes", "[plan][units]") {
  CHECK(*parse_rate("100Mbit", "r") == Approx(12.5e6));
  CHECK(*parse_rate("1Gbit", "r") == Approx(125e6));
  CHECK(*parse_rate("100Mbit/s", "r") == Approx(12.5e6));
  CHECK(*parse_rate("100Mbps", "r") == Approx(12.5e6));
  CHECK(*parse_rate("12.5MB", "r") == Approx(12.5e6));
  CHECK(*parse_rate("2MiB/s", "r") == Approx(2.0 * 1024 * 1024));
  CHECK(*parse_rate("1000", "r") == Approx(1000));
  CHECK(*parse_rate(" 512 kbit ", "r") == Approx(64e3));
}

TEST_CASE("counts accept decimal prefixes", "[plan][units]") {
  CHECK(*parse_count("18M", "p") == Approx(18e6));
  CHECK(*parse_count("1.5G", "p") == Approx(1.5e9));
  CHECK(*parse_count("125k", "p") == Approx(125e3));
  CHECK(*parse_count("4096", "p") == Approx(4096));
}

TEST_CASE("bad quantities are errors that name the value", "[plan][units]") {
  auto negative = parse_rate("-100Mbit", "peers[2].upload");
  REQUIRE_FALSE(negative);
  CHECK(negative.status().code() == dedloc::Code::kInvalidArgument);
  CHECK_THAT(negative.status().message(), Catch::Contains("peers[2].upload") && Catch::Contains(">= 0"));
  auto unit = parse_rate("100Mbytes", "download");
  REQUIRE_FALSE(unit);
  CHECK_THAT(unit.status().message(), Catch::Contains("unknown unit 'Mbytes'"));
  CHECK_FALSE(parse_rate("fast", "download"));
  CHECK_FALSE(parse_count("18X", "params"));
  CHECK_FALSE(parse_count("inf", "params"));
}

TEST_CASE("rates print in network units", "[plan][units]") {
  CHECK(format_rate(12.5e6) == "100 Mbit/s");
  CHECK(format_rate(125e6) == "1 Gbit/s");
  CHECK(format_count(18e6) == "18M");
}
