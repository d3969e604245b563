// The all-reduce benchmark's harness as a library call (lib/dedloc/avg/bench/all_reduce_bench.hpp): it
// forks its peer processes, so every test case runs in its own process (ctest runs one case per process)
// before anything here starts a ZeroMQ context.
#include <catch2/catch.hpp>

#include <unistd.h>

#include "dedloc/avg/bench/all_reduce_bench.hpp"
#include "support/nat_topology.hpp"

using namespace dedloc;
using namespace dedloc::avg::bench;

namespace {

BenchOptions small(size_t peers, const std::string& codec) {
  BenchOptions options;
  options.peers = peers;
  options.size = "96KiB";
  options.codec = codec;
  options.rounds = 2;
  options.part_kib = 16;  // several parts per share
  options.timeout_seconds = 30;
  options.name = "bench test";
  return options;
}

BenchReport run_ok(const BenchOptions& options) {
  auto plan = plan_all_reduce_bench(options);
  REQUIRE(plan.is_ok());
  auto report = run_all_reduce_bench(options, *plan);
  INFO(report.status().to_string());
  REQUIRE(report.is_ok());
  INFO(report->wrong_why);
  CHECK_FALSE(report->wrong);
  CHECK(report->rounds.size() == options.rounds);
  for (const RoundOutcome& round : report->rounds) {
    CHECK(round.peer_seconds.size() == options.peers);
    CHECK(round.seconds > 0);
    CHECK(round.max_rel_error <= round.tolerance_rel);
  }
  CHECK(report->median_seconds > 0);
  CHECK(report->busbw_gbps > 0);
  return *report;
}

}  // namespace

TEST_CASE("All-reduce bench: three forked peers average exactly over CURVE", "[proc][avg][bench]") {
  auto report = run_ok(small(3, "none"));
  CHECK(report.max_rel_error <= 1e-6);
  CHECK(report.tolerance_rel == Approx(1e-5));
}

TEST_CASE("All-reduce bench: two forked peers with fp16 parts stay within the codec's bound", "[proc][avg][bench]") {
  auto options = small(2, "fp16");
  options.encrypted = false;
  auto report = run_ok(options);
  CHECK(report.max_rel_error > 0);  // fp16 rounds: a zero would mean nothing was compressed
  CHECK(report.tolerance_rel > 1e-5);
}

TEST_CASE("All-reduce bench: planner shares for uneven bandwidths", "[proc][avg][bench]") {
  auto options = small(3, "none");
  options.encrypted = false;
  options.bandwidths = {"1Gbit", "100Mbit", "100Mbit"};
  run_ok(options);
}

TEST_CASE("All-reduce bench: each peer in its own namespace behind a rate-limited link", "[proc][avg][bench][netns]") {
  test::skip_unless_namespaces();
  auto options = small(2, "none");
  options.encrypted = false;
  options.emulate_links = true;
  options.bandwidths = {"200Mbit", "100Mbit"};
  run_ok(options);
}
