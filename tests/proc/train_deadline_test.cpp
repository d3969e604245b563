// Adaptive averaging deadlines end to end (averaging.adaptive_timeout, collab/deadline_estimator.hpp): two
// dedloc-train peers on loopback start with the recipe's averaging_timeout, and once five rounds completed
// each round's deadline is learned from them: far below the recipe's 30 s, never below the 1 s floor, and
// still long enough that every step averages. A third peer that joins later starts from the figures the
// others publish in their progress records: its first rounds already get a learned deadline.
#include <csignal>

#include <catch2/catch.hpp>

#include "support/test_paths.hpp"
#include "support/trainer_process.hpp"

using namespace std::chrono_literals;
using dedloc::test::TrainerArgs;
using dedloc::test::TrainerProcess;

TEST_CASE("Adaptive averaging deadlines: the recipe's timeout for the first rounds, then one learned from them",
          "[proc][train][deadline]") {
  const std::string dir = dedloc::test::make_temp_dir("dedloc-deadline");
  const std::string recipe = dedloc::test::write_recipe_variant(
      "recipes/mlp.yaml", dir, "adaptive.yaml",
      {{"  averaging_timeout: 30", "  averaging_timeout: 30\n  adaptive_timeout: true"}});
  constexpr std::uint64_t kEpochs = 12;
  TrainerArgs args{.recipe = recipe, .data_seed = 1, .min_peers = 2};
  auto a = TrainerProcess::start("a", args);
  REQUIRE(a.has_value());
  args.initial_peer = a->address();
  args.data_seed = 2;
  auto b = TrainerProcess::start("b", args);
  REQUIRE(b.has_value());
  constexpr std::uint64_t kJoinAt = 8;  // the first two have learned their deadlines (5 rounds) by then
  REQUIRE(dedloc::test::pump_until({&*a, &*b}, 120s, [&] { return a->epoch() >= kJoinAt; }));
  args.data_seed = 3;
  args.min_peers = 1;
  auto c = TrainerProcess::start("c", args);
  REQUIRE(c.has_value());
  REQUIRE(dedloc::test::pump_until({&*a, &*b, &*c}, 120s,
                                   [&] { return a->epoch() >= kEpochs && c->averaged_rounds() >= 2; }));
  for (auto* p : {&*a, &*b, &*c}) p->process().kill(SIGINT);
  for (auto* p : {&*a, &*b, &*c}) {
    CHECK(p->process().wait(30s).has_value());
    p->pump(100ms);
  }

  // The newcomer's first averaged round: a deadline from the swarm's figures, not the recipe's 30 s.
  std::optional<nlohmann::json> first;
  for (const auto& step : c->steps()) {
    if (step["event"] == "averaged") {
      first = step;
      break;
    }
  }
  REQUIRE(first.has_value());
  INFO("c's first averaged step: " << first->dump());
  CHECK(first->at("averaging_deadline").get<double>() < 5.0);
  CHECK(first->at("averaged_fraction").get<double>() == 1.0);

  for (auto* peer : {&*a, &*b}) {
    INFO("peer " << peer->name());
    size_t averaged = 0, learned = 0;
    for (const auto& step : peer->steps()) {
      INFO(step.dump());
      if (step["event"] != "averaged") continue;
      ++averaged;
      const double deadline = step["averaging_deadline"].get<double>();
      CHECK(step["averaging_seconds"].get<double>() < deadline);
      CHECK(step["averaged_fraction"].get<double>() == 1.0);
      if (averaged <= 5) {
        CHECK(deadline == 30.0);  // fewer than five rounds seen: the recipe's
      } else {
        CHECK(deadline >= 1.0);   // the floor
        CHECK(deadline < 5.0);    // loopback rounds of a 6 k-parameter MLP take milliseconds
        ++learned;
      }
    }
    CHECK(averaged + 1 >= kEpochs);  // a loaded machine may miss a group once
    CHECK(learned > 0);
  }
}
