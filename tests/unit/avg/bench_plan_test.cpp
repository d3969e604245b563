// The all-reduce benchmark's plan (lib/dedloc/avg/bench/bench_plan.hpp): sizes, the part grid, shares,
// and the flag each refusal names.
#include <catch2/catch.hpp>

#include "dedloc/avg/bench/bench_plan.hpp"
#include "dedloc/avg/bench/synthetic_vector.hpp"

#include <functional>
#include <limits>

using namespace dedloc;
using namespace dedloc::avg::bench;

TEST_CASE("Bench plan: sizes parse with their units, and nonsense names --size", "[unit][avg][bench]") {
  CHECK(*parse_size("64MiB") == 64ull << 20);
  CHECK(*parse_size("1GiB") == 1ull << 30);
  CHECK(*parse_size("100MB") == 100'000'000ull);
  CHECK(*parse_size("4096B") == 4096);
  CHECK(*parse_size("4096") == 4096);
  CHECK(*parse_size("1.5KiB") == 1536);
  for (const char* bad : {"", "MiB", "-1MiB", "0", "12 MiB", "3furlongs", "nan"}) {
    INFO(bad);
    auto size = parse_size(bad);
    REQUIRE_FALSE(size.is_ok());
    CHECK(size.status().code() == Code::kInvalidArgument);
    CHECK_THAT(size.status().message(), Catch::Contains("--size"));
  }
}

TEST_CASE("Bench plan: the part grid is training's for the same budget, whatever the codec", "[unit][avg][bench]") {
  for (const char* name : {"none", "fp16", "scaled-fp16", "uint8", "blockwise8"}) {
    INFO(name);
    BenchOptions options;
    options.size = "64MiB";  // shares of 4 Mi values: cut at the configured grid
    options.codec = name;
    options.encrypted = false;
    auto plan = plan_all_reduce_bench(options);
    REQUIRE(plan.is_ok());
    CHECK(plan->part_elements == avg::default_part_elements());  // 512 KiB: 128 Ki values
    options.part_kib = 64;
    plan = plan_all_reduce_bench(options);
    REQUIRE(plan.is_ok());
    CHECK(plan->part_elements == avg::part_elements_for(avg::kPartGridCodec, 64 * 1024));
    CHECK(plan->part_elements == 16 * 1024);
    // Shares of 256 Ki values: finer, so that each is cut into avg::kMinPartsPerShare parts.
    options.size = "4MiB";
    options.part_kib = 512;
    plan = plan_all_reduce_bench(options);
    REQUIRE(plan.is_ok());
    CHECK(plan->part_elements == 32 * 1024);
  }
}

TEST_CASE("Bench plan: equal shares, planner shares, and refusals naming their flag", "[unit][avg][bench]") {
  BenchOptions options;
  options.peers = 3;
  options.size = "12KiB";
  options.encrypted = false;
  auto plan = plan_all_reduce_bench(options);
  REQUIRE(plan.is_ok());
  CHECK(plan->elements == 3072);
  CHECK(plan->counts == std::vector<std::uint64_t>{1024, 1024, 1024});
  CHECK_FALSE(plan->planned);

  options.bandwidths = {"1Gbit", "100Mbit", "100Mbit"};
  plan = plan_all_reduce_bench(options);
  REQUIRE(plan.is_ok());
  CHECK(plan->planned);
  CHECK(plan->counts[0] + plan->counts[1] + plan->counts[2] == 3072);
  CHECK(plan->counts[0] > plan->counts[1]);
  options.uniform = true;
  plan = plan_all_reduce_bench(options);
  REQUIRE(plan.is_ok());
  CHECK_FALSE(plan->planned);

  struct Bad {
    std::function<void(BenchOptions&)> change;
    std::string flag;
  };
  for (const Bad& bad : {Bad{[](BenchOptions& o) { o.peers = 1; }, "--peers"},
                         Bad{[](BenchOptions& o) { o.rounds = 0; }, "--rounds"},
                         Bad{[](BenchOptions& o) { o.part_kib = 0; }, "--part-kib"},
                         Bad{[](BenchOptions& o) { o.size = "10B"; }, "--size"},
                         Bad{[](BenchOptions& o) { o.codec = "zip"; }, "--codec"},
                         Bad{[](BenchOptions& o) { o.bandwidths = {"1Gbit"}; }, "--bandwidths"},
                         Bad{[](BenchOptions& o) { o.uniform = true; }, "--uniform"},
                         Bad{[](BenchOptions& o) { o.emulate_links = true; }, "--emulate-links"},
                         Bad{[](BenchOptions& o) { o.mtu = 1500; }, "--mtu needs --emulate-links"}}) {
    BenchOptions o;
    o.peers = 3;
    o.size = "12KiB";
    o.encrypted = false;
    bad.change(o);
    INFO(bad.flag);
    auto refused = plan_all_reduce_bench(o);
    REQUIRE_FALSE(refused.is_ok());
    CHECK(refused.status().code() == Code::kInvalidArgument);
    CHECK_THAT(refused.status().to_string(), Catch::Contains(bad.flag));
  }
}

TEST_CASE("Bench synthetic vectors: the exact mean checks clean, a wrong value is found, and all is refilled",
          "[unit][avg][bench]") {
  std::vector<float> vector(1003);
  fill_synthetic(vector, 2.0f);
  auto check = check_and_refill(vector, 2.0, 3.0f);
  CHECK(check.max_abs_error == 0);
  CHECK(check.scale > 1.0);
  std::vector<float> expected(1003);
  fill_synthetic(expected, 3.0f);
  CHECK(vector == expected);
  vector[1001] += 0.5f;  // in the scalar tail
  check = check_and_refill(vector, 3.0, 1.0f);
  CHECK(check.max_abs_error == Approx(0.5).margin(1e-6));
  // A NaN early in the vectorized body, where later lanes' finite errors must not hide it; one in the tail.
  vector[17] = std::numeric_limits<float>::quiet_NaN();
  check = check_and_refill(vector, 1.0, 1.0f);
  CHECK(check.max_abs_error == std::numeric_limits<double>::infinity());
  vector[1002] = std::numeric_limits<float>::quiet_NaN();
  check = check_and_refill(vector, 1.0, 1.0f);
  CHECK(check.max_abs_error == std::numeric_limits<double>::infinity());
}
