// A volunteer stopping its trainer (SIGINT) while its group for the coming step has already formed: the
// trainer keeps computing until that step, averages it with the group and only then leaves, so the others
// get its share of the vector reduced instead of averaging without it (docs/recipes.md, "Stopping"). A
// second SIGINT leaves at once.
//
// Three synthetic trainers (emulated compute, lib/dedloc/train/models/synthetic_task.hpp) gather a global
// batch in about 6 s; with a matchmaking time longer than that, each peer looks for the next step's group
// as soon as it stepped, and the group of all three forms within a second. The signal comes 2 s after a
// step of the peer that leaves: inside the window where its group is formed and waiting for the batch.
#include <chrono>
#include <csignal>

#include <catch2/catch.hpp>

#include "support/process.hpp"
#include "support/test_paths.hpp"
#include "support/trainer_process.hpp"

using namespace std::chrono_literals;
using dedloc::test::TrainerArgs;
using dedloc::test::TrainerProcess;
using dedloc::test::pump_until;

namespace {

std::string leave_recipe(const std::string& dir) {
  return dedloc::test::write_recipe_variant(
      "recipes/synthetic.yaml", dir, "synthetic.yaml",
      {{"parameters: 1000000 ", "parameters: 200000 "},
       {"target_batch_size: 512 ", "target_batch_size: 720 "},  // 6 s of three peers at 40 samples/s
       {"micro_batch_size: 16 ", "micro_batch_size: 8 "},
       {"matchmaking_time: 2\n", "matchmaking_time: 10\n"}});
}

struct Swarm {
  dedloc::test::ChildProcess bootstrap;
  std::vector<TrainerProcess> trainers;  // the last one is the one that leaves

  std::vector<TrainerProcess*> all() {
    std::vector<TrainerProcess*> out;
    for (auto& t : trainers) out.push_back(&t);
    return out;
  }
  TrainerProcess& leaver() { return trainers.back(); }
};

Swarm start_swarm(const std::string& run_id) {
  auto [bootstrap, ready] = dedloc::test::start_ready({dedloc::test::binary_path("tools/dedloc-dht/dedloc-dht"),
                                                       "--log-level", "warning", "serve", "--listen", "tcp://127.0.0.1:0"});
  const std::string address = ready["endpoints"][0].get<std::string>();
  const std::string recipe = leave_recipe(dedloc::test::make_temp_dir("dedloc-leave"));
  Swarm swarm{std::move(bootstrap), {}};
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    TrainerArgs args{.recipe = recipe, .initial_peer = address, .run_id = run_id, .data_seed = seed, .max_time = 240,
                     .min_peers = 3, .extra = {"--compute-rate", "40"}};
    auto trainer = TrainerProcess::start("peer" + std::to_string(seed), args);
    REQUIRE(trainer.has_value());
    swarm.trainers.push_back(std::move(*trainer));
  }
  // Two steps averaged by all three: the groups now form right after each step.
  REQUIRE(pump_until(swarm.all(), 90s, [&] {
    for (auto& t : swarm.trainers) {
      size_t of_three = 0;
      for (const auto& s : t.steps()) of_three += s["event"] == "averaged" && s["group_size"] == 3;
      if (of_three < 2) return false;
    }
    return true;
  }));
  return swarm;
}

// Pumps until `t` reports a step after the ones it has, then 2 s more: inside the formed group's wait.
void wait_for_next_step_and_two_seconds(Swarm& swarm, TrainerProcess& t) {
  const size_t steps = t.steps().size();
  REQUIRE(pump_until(swarm.all(), 30s, [&] { return t.steps().size() > steps; }));
  pump_until(swarm.all(), 2s, [] { return false; });
}

// The step line `t` reported for `epoch`, if any.
std::optional<nlohmann::json> step_at(const TrainerProcess& t, std::uint64_t epoch) {
  for (const auto& s : t.steps()) {
    if (s["epoch"] == epoch) return s;
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("A trainer SIGINTed while its group for the next step waits finishes that step with the group, then leaves",
          "[proc][train][leave]") {
  Swarm swarm = start_swarm("leave-graceful");
  TrainerProcess& leaver = swarm.leaver();
  wait_for_next_step_and_two_seconds(swarm, leaver);
  const std::uint64_t signalled_at = leaver.epoch();
  const size_t steps_before = leaver.steps().size();
  const auto sent = std::chrono::steady_clock::now();
  leaver.process().kill(SIGINT);

  REQUIRE(pump_until(swarm.all(), 40s, [&] { return leaver.find("exit").has_value(); }));
  const auto code = leaver.process().wait(10s);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  INFO("the leaver exited " << took << " s after SIGINT, at epoch " << leaver.epoch() << "; signalled at epoch "
                            << signalled_at);
  CHECK(code == 130);
  // The one step it still took: the one its group waited for, averaged by all three in full.
  REQUIRE(leaver.steps().size() == steps_before + 1);
  const auto last = leaver.steps().back();
  CHECK(last["epoch"] == signalled_at + 1);
  CHECK(last["event"] == "averaged");
  CHECK(last["group_size"] == 3);
  for (size_t i = 0; i + 1 < swarm.trainers.size(); ++i) {
    TrainerProcess& stayer = swarm.trainers[i];
    REQUIRE(pump_until(swarm.all(), 20s, [&] { return step_at(stayer, signalled_at + 1).has_value(); }));
    const auto step = *step_at(stayer, signalled_at + 1);
    INFO(stayer.name() << "'s step: " << step.dump());
    CHECK(step["event"] == "averaged");
    CHECK(step["group"] == last["group"]);
    CHECK(step["averaged_fraction"] == 1.0);  // the leaver's share came back reduced
  }
  // The two left keep averaging, without waiting for the one gone (its progress record was withdrawn).
  REQUIRE(pump_until(swarm.all(), 40s, [&] {
    for (size_t i = 0; i + 1 < swarm.trainers.size(); ++i) {
      auto step = step_at(swarm.trainers[i], signalled_at + 2);
      if (!step || (*step)["event"] != "averaged" || (*step)["group_size"] != 2) return false;
    }
    return true;
  }));
}

TEST_CASE("A second SIGINT makes a trainer finishing its group's step leave at once, without the step",
          "[proc][train][leave]") {
  Swarm swarm = start_swarm("leave-now");
  TrainerProcess& leaver = swarm.leaver();
  wait_for_next_step_and_two_seconds(swarm, leaver);
  const size_t steps_before = leaver.steps().size();
  const auto sent = std::chrono::steady_clock::now();
  leaver.process().kill(SIGINT);
  pump_until(swarm.all(), 300ms, [] { return false; });
  leaver.process().kill(SIGINT);
  const auto code = leaver.process().wait(10s);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  INFO("the leaver exited " << took << " s after the first SIGINT");
  CHECK(code == 130);
  CHECK(took < 2.0);  // the group's step was ~4 s away
  leaver.pump(200ms);
  CHECK(leaver.steps().size() == steps_before);
}
