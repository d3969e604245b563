// Group buckets train one model (collab/group_buckets.hpp, "the cross-bucket stage"): five synthetic
// dedloc-train peers (lib/dedloc/train/models/synthetic_task.hpp) in groups of at most 4 split every round
// into two buckets that average apart; then each group's carrier averages with the other's and hands the
// result to its group. Every peer's
// gradient is known in closed form (c = data seed · 2^-10 for every parameter), parameters start at 0 and
// the recipe steps with plain SGD at lr 1, so the step to epoch e applied c̄_e = W_{e−1} − W_e with
// W_e = params_norm_e / √N. Each step must apply the samples-weighted mean of all five peers' gradients,
// Σ s_i·c_i / Σ s_i, though no group held more than three of them, and every peer must hold the same
// parameters to the bit (one parameter hash per epoch). Each bucket stepping on its own average
// (averaging.across_buckets: false) applies its bucket's mean instead, and the hashes part.
#include <cmath>
#include <map>
#include <set>

#include <catch2/catch.hpp>

#include "support/process.hpp"
#include "support/test_paths.hpp"
#include "support/trainer_process.hpp"

using namespace std::chrono_literals;
using dedloc::test::TrainerProcess;

namespace {

constexpr std::uint64_t kEpochs = 5;
constexpr double kParameters = 200000;
constexpr double kExact = 1e-5;  // float32 rounding of the step; a bucket's mean instead is off by percents

// Data seeds and compute rates (samples/s).
const std::vector<dedloc::test::SyntheticPeer> kPeers{{1, 40}, {2, 60}, {3, 80}, {4, 100}, {5, 120}};

double gradient_of(const dedloc::test::SyntheticPeer& peer) { return static_cast<double>(peer.data_seed) / 1024; }

// The synthetic recipe, small and quick, in groups of `target_group_size`, sitting missed rounds out (which
// also takes a missed round's result from the carriers).
std::string bucket_recipe(const std::string& dir, size_t target_group_size) {
  return dedloc::test::write_recipe_variant(
      "recipes/synthetic.yaml", dedloc::test::make_temp_dir(dir), "synthetic.yaml",
      {{"parameters: 1000000 ", "parameters: 200000 "},
       {"target_batch_size: 512 ", "target_batch_size: 160 "},
       {"micro_batch_size: 16 ", "micro_batch_size: 8 "},
       {"target_group_size: 16\n", "target_group_size: " + std::to_string(target_group_size) + "\n"},
       {"matchmaking_time: 2\n", "matchmaking_time: 1\n"},
       {"schedule:\n", "collaboration:\n  sit_out_missed_rounds: true\nschedule:\n"}});
}

}  // namespace

TEST_CASE("Synthetic peers split into two buckets take the swarm's samples-weighted mean, and hold one model",
          "[proc][train][synthetic]") {
  auto [bootstrap, ready] = dedloc::test::start_ready({dedloc::test::binary_path("tools/dedloc-dht/dedloc-dht"),
                                                       "--log-level", "warning", "serve", "--listen", "tcp://127.0.0.1:0"});
  const std::string address = ready["endpoints"][0].get<std::string>();
  // Five trainers in groups of 4: two buckets of about 3 (0.8 of a group), whose carriers meet in a group of 2.
  const std::string recipe = bucket_recipe("dedloc-buckets", 4);

  std::string why_not;
  auto trainers = dedloc::test::run_synthetic_peers(recipe, address, kPeers, kEpochs, 90, 120s, why_not);
  REQUIRE(why_not == "");
  std::vector<TrainerProcess*> all;
  for (auto& t : trainers) all.push_back(&t);

  // steps[peer][epoch]: the step lines, and downloads (a peer late for the first round loads its result).
  std::vector<std::map<std::uint64_t, nlohmann::json>> steps(all.size());
  std::vector<std::map<std::uint64_t, nlohmann::json>> loads(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    for (const auto& s : all[i]->steps()) steps[i][s["epoch"].get<std::uint64_t>()] = s;
    for (const auto& e : all[i]->events()) {
      if (e.value("event", "") == "loaded_state") loads[i][e["epoch"].get<std::uint64_t>()] = e;
    }
  }
  const double root_n = std::sqrt(kParameters);
  size_t across = 0;  // steps whose cross-bucket stage brought both buckets' averages
  for (std::uint64_t epoch = 2; epoch <= kEpochs; ++epoch) {
    // The swarm's mean over every peer that stepped to this epoch, and the parameters each holds after it.
    double weighted = 0, samples = 0;
    std::set<std::string> hashes, groups;
    for (size_t i = 0; i < all.size(); ++i) {
      const auto step = steps[i].find(epoch);
      INFO(all[i]->name() << " at epoch " << epoch);
      REQUIRE(step != steps[i].end());
      const auto& s = step->second;
      INFO(s.dump());
      REQUIRE(s["event"] == "averaged");
      CHECK(s["averaged_fraction"] == 1.0);
      CHECK(s["group_size"].get<int>() <= 4);
      across += s.value("buckets", 0) == 2 ? 1 : 0;
      weighted += s["samples"].get<double>() * gradient_of(kPeers[i]);
      samples += s["samples"].get<double>();
      hashes.insert(s["params_hash"].get<std::string>());
      groups.insert(s["group"].get<std::string>());
    }
    const double expected = weighted / samples;
    INFO("epoch " << epoch << ": " << groups.size() << " groups");
    CHECK(groups.size() >= 2);  // the buckets averaged apart
    CHECK(hashes.size() == 1);  // ... and every peer holds the same parameters, to the bit
    for (size_t i = 0; i < all.size(); ++i) {
      // W before this step: the previous step's, or the state loaded in its place.
      const auto before = steps[i].count(epoch - 1) ? steps[i].at(epoch - 1) : loads[i].at(epoch - 1);
      const double applied = (steps[i].at(epoch)["params_norm"].get<double>() - before["params_norm"].get<double>()) / root_n;
      INFO(all[i]->name() << " at epoch " << epoch << ": applied " << applied << ", the swarm's mean " << expected);
      CHECK(std::abs(applied - expected) <= kExact * expected);
    }
  }
  // Every step of epochs 2..5 came through both stages on a quiet loopback: each peer was told its values
  // hold both buckets' averages.
  CHECK(across == all.size() * (kEpochs - 1));
}

// A round missed, taken from the carriers (Trainer::take_missed_round_result): five trainers in groups of 3
// split into three buckets of at most 2 (0.8 of a group), so every round one of them is alone in its bucket
// and finds no group (and looks no second window: nobody else is expected there). Before, it waited for the
// round's end and downloaded the state; now it takes the carriers' result the moment they list it and
// steps with it: the two carriers' round (at its deadline, the third bucket's carrier never comes) averages
// both pairs, and the peer alone steps to the same parameters, to the bit, without its samples. (In the
// last round the others stop as they reach the last epoch: the one alone then finds nobody to take from,
// sees the round over, and steps on its own.)
TEST_CASE("A peer alone in its bucket steps with the carriers' result, to the swarm's parameters",
          "[proc][train][synthetic]") {
  auto [bootstrap, ready] = dedloc::test::start_ready({dedloc::test::binary_path("tools/dedloc-dht/dedloc-dht"),
                                                       "--log-level", "warning", "serve", "--listen", "tcp://127.0.0.1:0"});
  const std::string recipe = bucket_recipe("dedloc-bucket-alone", 3);
  std::string why_not;
  constexpr std::uint64_t kLastEpoch = kEpochs + 1;
  auto trainers = dedloc::test::run_synthetic_peers(recipe, ready["endpoints"][0].get<std::string>(), kPeers, kLastEpoch,
                                                    90, 120s, why_not);
  REQUIRE(why_not == "");

  std::map<std::uint64_t, std::set<std::string>> hashes;  // per epoch: the parameters peers stepped to
  std::map<std::uint64_t, double> weighted, samples;      // per epoch: Σ s_i·c_i and Σ s_i over the steps to it
  std::map<std::uint64_t, std::vector<double>> applied;   // per epoch: each stepping peer's c̄ (from its norms)
  size_t taken = 0, local = 0, missed_downloads = 0;
  std::set<std::uint64_t> taken_at, local_at;  // epochs a step took the carriers' result, or stepped alone
  for (size_t i = 0; i < trainers.size(); ++i) {
    std::map<std::uint64_t, double> norm_at;  // after each step or download
    for (const auto& e : trainers[i].events()) {
      const std::string event = e.value("event", "");
      if (event == "loaded_state") {
        missed_downloads += e.value("missed_round", false) ? 1 : 0;
        norm_at[e["epoch"].get<std::uint64_t>()] = e["params_norm"].get<double>();
        continue;
      }
      if (event != "averaged" && event != "local" && event != "alone") continue;
      INFO(trainers[i].name() << ": " << e.dump());
      const auto epoch = e["epoch"].get<std::uint64_t>();
      if (epoch == kLastEpoch) continue;
      if (event != "averaged") {
        ++local;
        local_at.insert(epoch);
      }
      if (e.contains("took_result_from")) {
        ++taken;
        taken_at.insert(epoch);
        CHECK(e["samples"] == 0);  // its own samples are not in the carriers' result
      }
      hashes[epoch].insert(e["params_hash"].get<std::string>());
      weighted[epoch] += e["samples"].get<double>() * gradient_of(kPeers[i]);
      samples[epoch] += e["samples"].get<double>();
      if (norm_at.count(epoch - 1)) {
        applied[epoch].push_back((e["params_norm"].get<double>() - norm_at[epoch - 1]) / std::sqrt(kParameters));
      }
      norm_at[epoch] = e["params_norm"].get<double>();
    }
  }
  INFO(taken << " steps took the carriers' result, " << local << " local steps, " << missed_downloads
             << " rounds sat out with a download");
  // One peer alone in most rounds (peers whose views differ by a record count two buckets, of 3 and 2, for
  // a round or two). A heavily loaded machine (the whole suite in parallel) may let the carriers' round
  // outlast the wait of the one alone, which then steps on its own: the epochs where that happened are not
  // checked below, and they stay few.
  CHECK(local <= 2);
  CHECK(taken >= 2);
  CHECK(missed_downloads <= 1);
  size_t taken_and_checked = 0;
  for (std::uint64_t epoch = 2; epoch < kLastEpoch; ++epoch) {
    if (local_at.count(epoch)) continue;
    taken_and_checked += taken_at.count(epoch);
    INFO("epoch " << epoch);
    CHECK(hashes[epoch].size() == 1);  // one model, the peer alone included
    // What each peer applied is the mean over every sample in the step: the pairs' and nothing of the peer
    // alone's.
    const double expected = weighted[epoch] / samples[epoch];
    for (double c : applied[epoch]) CHECK(std::abs(c - expected) <= kExact * expected);
  }
  CHECK(taken_and_checked >= 1);  // a step that took the result, to the group's parameters and the exact mean
}
