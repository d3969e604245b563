// A peer left out of its round's group (collaboration.sit_out_missed_rounds, Trainer::sit_out_missed_round):
// three dedloc-train peers on loopback whose groups hold two (averaging.target_group_size: 2, one group key),
// so every round one of them finds its group full and nobody else looking. It waits for the pair to finish
// that round and loads their state instead of stepping alone: no local steps, and after each such download
// it holds exactly the parameters the pair averaged to. With the option off, the one left out never waits
// for the pair: it steps alone, or, when the pair went two epochs on meanwhile, drops its batch and
// downloads their state (no step from behind).
#include <algorithm>
#include <csignal>
#include <map>

#include <catch2/catch.hpp>

#include "support/process.hpp"
#include "support/test_paths.hpp"
#include "support/trainer_process.hpp"

using namespace std::chrono_literals;
using dedloc::test::TrainerArgs;
using dedloc::test::TrainerProcess;

namespace {

struct Run {
  std::vector<std::vector<nlohmann::json>> events;  // per peer, every --json event line
};

Run run_three(const std::string& dir, bool sit_out, const std::string& zero_weight = "never", int batch = 96) {
  // Synthetic peers (docs/recipes.md, "The synthetic task") at 80 samples/s each: a global batch of 96
  // every 0.4 s, slow enough for matchmaking on a loaded machine, fast enough for ten rounds in seconds.
  const std::string recipe = dedloc::test::write_recipe_variant(
      "recipes/synthetic.yaml", dir, sit_out ? "sit-out-" + zero_weight + ".yaml" : "step-alone.yaml",
      {{"parameters: 1000000 ", "parameters: 200000 "},
       {"target_batch_size: 512 ", "target_batch_size: " + std::to_string(batch) + " "},
       {"micro_batch_size: 16 ", "micro_batch_size: 8 "},
       {"  target_group_size: 16", "  target_group_size: 2\n  group_buckets: false"},
       {"  matchmaking_time: 2\n", "  matchmaking_time: 1\n"},
       {"  lr: 1\n", std::string("  lr: 1\ncollaboration:\n  sit_out_missed_rounds: ") + (sit_out ? "true" : "false") +
                         "\n  zero_weight_next_round: " + zero_weight + "\n"}});
  constexpr std::uint64_t kEpochs = 10;
  auto [bootstrap, ready] = dedloc::test::start_ready({dedloc::test::binary_path("tools/dedloc-dht/dedloc-dht"),
                                                       "--log-level", "warning", "serve", "--listen", "tcp://127.0.0.1:0"});
  std::vector<TrainerProcess> trainers;
  for (std::uint64_t seed : {1, 2, 3}) {
    TrainerArgs args{.recipe = recipe, .initial_peer = ready["endpoints"][0].get<std::string>(), .data_seed = seed,
                     .min_peers = 3, .extra = {"--params-hash", "--compute-rate", "80"}};
    auto trainer = TrainerProcess::start("peer" + std::to_string(seed), args);
    REQUIRE(trainer.has_value());
    trainers.push_back(std::move(*trainer));
  }
  std::vector<TrainerProcess*> peers;
  for (auto& t : trainers) peers.push_back(&t);
  REQUIRE(dedloc::test::pump_until(peers, 120s, [&] {
    return std::all_of(peers.begin(), peers.end(), [&](TrainerProcess* p) { return p->epoch() >= kEpochs; });
  }));
  for (auto* p : peers) p->process().kill(SIGINT);
  Run run;
  for (auto* p : peers) {
    CHECK(p->process().wait(30s).has_value());
    p->pump(100ms);
    run.events.push_back(p->events());
  }
  return run;
}

size_t count(const Run& run, const std::string& event, bool missed_round = false) {
  size_t n = 0;
  for (const auto& peer : run.events) {
    for (const auto& e : peer) {
      if (e.value("event", "") == event && (!missed_round || e.value("missed_round", false))) ++n;
    }
  }
  return n;
}

}  // namespace

TEST_CASE("A peer left out of its round's group loads that round's result instead of stepping alone",
          "[proc][train][missed-round]") {
  const std::string dir = dedloc::test::make_temp_dir("dedloc-missed-round");
  const Run run = run_three(dir, /*sit_out=*/true, "never");

  // Every round one of the three is left out, and it sits the round out: no step of its own. (On a loaded
  // machine the one left out may instead fall two epochs behind and catch up as any lagging peer does: an
  // ordinary download, not counted here.)
  CHECK(count(run, "averaged") >= 10);
  CHECK(count(run, "loaded_state", /*missed_round=*/true) >= 1);
  CHECK(count(run, "local") <= 1);  // a loaded machine may, once, outlast the wait for the pair

  // What it loaded is what the pair averaged to: the same parameters as the pair's step to that epoch.
  std::map<std::uint64_t, std::string> averaged_hash;  // epoch -> the parameters a group stepped to
  for (const auto& peer : run.events) {
    for (const auto& e : peer) {
      if (e.value("event", "") == "averaged") averaged_hash.emplace(e["epoch"].get<std::uint64_t>(), e["params_hash"]);
    }
  }
  size_t checked = 0;
  for (const auto& peer : run.events) {
    for (const auto& e : peer) {
      if (e.value("event", "") != "loaded_state" || !e.value("missed_round", false)) continue;
      INFO(e.dump());
      const auto group = averaged_hash.find(e["epoch"].get<std::uint64_t>());
      if (group == averaged_hash.end()) continue;  // loaded a later epoch than any group's line we kept
      CHECK(e["params_hash"] == group->second);
      ++checked;
    }
  }
  CHECK(checked >= 1);
}

TEST_CASE("With sit_out_missed_rounds off, the peer left out steps alone or, left behind, downloads",
          "[proc][train][missed-round]") {
  const std::string dir = dedloc::test::make_temp_dir("dedloc-missed-round-off");
  const Run run = run_three(dir, /*sit_out=*/false);
  // A round sat out is a download marked missed_round that came after waiting for the pair; without the
  // option the one left out either steps alone ("local") or, two epochs behind by then, downloads as any
  // lagging peer does (an unmarked download); 3 of either in 10 epochs here, a loaded machine may turn one
  // into a round found late (a marked download).
  const size_t unmarked_downloads = count(run, "loaded_state") - count(run, "loaded_state", /*missed_round=*/true);
  INFO("local steps " << count(run, "local") << ", unmarked downloads " << unmarked_downloads);
  CHECK(count(run, "local") + unmarked_downloads >= 2);
}

TEST_CASE("A peer sitting a round out takes part in the next at weight 0 while it downloads, and steps as its group",
          "[proc][train][missed-round]") {
  // collaboration.zero_weight_next_round: always (on loopback a download takes milliseconds, so `auto`
  // would never find it worth it): the one left out is already in the next round's group when it starts
  // downloading the missed round's result; it serves that round at weight 0 meanwhile and then steps with
  // the group's average, from the state it loaded, to the parameters its group's other member steps to.
  const std::string dir = dedloc::test::make_temp_dir("dedloc-missed-round-zero");
  // A batch of 480 (2 s): the round the one left out serves at weight 0 is still under way when its
  // download of the missed round's result lands (with 96, the others were rounds ahead by then).
  const Run run = run_three(dir, /*sit_out=*/true, "always", 480);
  CHECK(count(run, "averaged") >= 10);
  CHECK(count(run, "local") <= 1);
  // (epoch, group) -> each member's step: the samples it added, whether its whole vector came back averaged,
  // the parameters it stepped to.
  struct Member {
    std::uint64_t samples;
    bool in_full;
    std::string hash;
  };
  std::map<std::pair<std::uint64_t, std::string>, std::vector<Member>> groups;
  for (const auto& peer : run.events) {
    for (const auto& e : peer) {
      if (e.value("event", "") != "averaged") continue;
      groups[{e["epoch"].get<std::uint64_t>(), e["group"].get<std::string>()}].push_back(
          {e["samples"].get<std::uint64_t>(), e.value("averaged_fraction", 0.0) >= 1, e["params_hash"].get<std::string>()});
    }
  }
  // A member at weight 0 steps only with the whole vector averaged, and then to the parameters of every
  // member whose vector came back averaged in full (one whose reducer dropped it keeps its own values there).
  size_t zero_weight_steps = 0;
  for (const auto& [key, members] : groups) {
    INFO("epoch " << key.first << ", group " << key.second);
    for (const auto& zero : members) {
      if (zero.samples != 0) continue;
      ++zero_weight_steps;
      CHECK(zero.in_full);
      for (const auto& m : members) {
        if (m.in_full) CHECK(m.hash == zero.hash);  // bit-identical parameters
      }
    }
  }
  CHECK(zero_weight_steps >= 1);
}
