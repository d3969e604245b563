// A whole collaboration in the lab (dedloc-lab run): public peers and volunteers behind NAT through a
// relay, 300 ms apart on 100 Mbit/s links (matchmaking and RPC deadlines must hold on the longest paths), running the real dedloc-dht, dedloc-relay and dedloc-train
// (synthetic task). Needs root and /dev/net/tun; otherwise SKIPPED with the reason (exit 77).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "support/lab_scenario.hpp"

using namespace dedloc;

TEST_CASE("Lab scenario: peers behind NAT train with public peers through a relay, 300 ms apart", "[proc][lab]") {
  auto run = test::run_lab_scenario("long-paths.yaml", "--duration 45s");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  REQUIRE(run.report.is_object());
  const auto& report = run.report;
  CHECK(report["global_steps"].get<int>() >= 1);
  CHECK(report["averaged_fraction"].get<double>() > 0.5);
  CHECK(report["samples_per_s"].get<double>() > 0);
  // The volunteers behind NAT took part: they sent gradients, through the relay.
  CHECK(report["groups"]["home"]["bytes_sent_per_step"].get<double>() > 0);
  CHECK(report["predicted_steps_per_s"].get<double>() > 0);
}

// The volunteer-scale scenario in short (bench/lab/scenarios/volunteers-16.yaml; the 64-peer one is
// tests/proc/lab_volunteers_test.cpp, labelled slow): 16 peers, two groups averaging side by side, volunteers
// behind NAT coming and going, a wave of 4 joining at once, a relay killed. The bounds are looser than the
// goals recorded in bench/lab/README.md (there: 90% of steps averaged), because the suite runs this beside
// other tests on two cores.
TEST_CASE("Lab scenario: 16 volunteers come and go, a wave joins, a relay dies, and the swarm keeps averaging", "[proc][lab]") {
  auto run = test::run_lab_scenario("volunteers-16.yaml");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  REQUIRE(run.report.is_object());
  const auto& report = run.report;
  CHECK(report["global_steps"].get<int>() >= 5);
  CHECK(report["averaged_fraction"].get<double>() >= 0.75);
  CHECK(report["nonfinite_losses"].get<int>() == 0);
  // Nobody's all-reduce ran past its deadline waiting for the dead (a cut round reads exactly 1).
  CHECK(report["longest_round_over_deadline"].get<double>() <= 1.05);
  // The wave: every joiner downloaded the state, and the wave's downloads did not all come from one donor.
  // Its four joins alone may, now and then: a joiner keeps only a state with the swarm's leading parameters,
  // and while this scenario's faults split the swarm one public peer may be the only donor holding them; or
  // four joiners draw the same of four equal donors (1 in 64). How a crowd's joins spread is held with 16
  // joiners in tests/proc/lab_volunteers_test.cpp.
  const auto& wave = report["waves"]["wave"];
  CHECK(wave["downloads"].get<int>() >= 4);
  CHECK(wave["join"]["downloads"].get<int>() >= 3);
  CHECK(wave["donors"].get<int>() >= 2);
  CHECK(wave["averaged"].get<int>() >= 3);
  // Memory stays bounded: a synthetic trainer is about 200 MiB (most of it libtorch's code).
  for (const char* group : {"node", "home", "wave"}) {
    INFO(group);
    CHECK(report["groups"][group]["peak_rss_mib"].get<double>() < 600);
  }
  CHECK(report["groups"]["home"]["bytes_sent_per_step"].get<double>() > 0);
  // One model: the buckets' averages are averaged across them (docs/recipes.md, "Group buckets"). This
  // scenario's faults split the swarm for a while (bench/lab/README.md, "One model across buckets"); the
  // share of step reports that carry their epoch's most common parameter hash tells the two apart: 59-76%
  // on a quiet machine, 38-49% beside the suite, and 15% with each bucket stepping on its own average.
  // (Whole epochs with one hash come too, but beside the suite they may all fall in the warm-up, before the
  // measured window.)
  CHECK(report["one_model"]["fraction_on_majority"].get<double>() >= 0.3);
}

// A volunteer whose link goes down for 10 s (bench/lab/scenarios/link-outage.yaml) meanwhile loses every
// DHT contact, its relay and any download in flight. Once the link is back it must find the swarm again:
// the DHT through the contacts it dropped (dht/way_back.hpp), the relay it had (relay_keeper.hpp), and
// the round after a download. Before, it trained alone for the rest of the run.
TEST_CASE("Lab scenario: a volunteer whose link went down for 10 s averages again once it is back", "[proc][lab]") {
  auto run = test::run_lab_scenario("link-outage.yaml");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  REQUIRE(run.report.is_object());
  const auto& outages = run.report["outages"];
  REQUIRE(outages.size() == 1);
  const auto& outage = outages[0];
  CHECK(outage["peer"] == "home-0");
  // It averages again (75 s remain after the outage). How soon is measured in bench/lab/README.md: 9 s on a
  // quiet machine, 30-53 s beside the suite's other tests, where a step takes 6-35 s and the peer's
  // catch-up misses a round or three.
  REQUIRE_FALSE(outage["back_to_averaged_s"].is_null());
  CHECK(outage["averaged_after"].get<int>() >= 1);
  CHECK(run.report["nonfinite_losses"].get<int>() == 0);
}
