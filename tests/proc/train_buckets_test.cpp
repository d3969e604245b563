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

}  // namespace

TEST_CASE("Synthetic peers split into two buckets take the swarm's samples-weighted mean, and hold one model",
          "[proc][train][synthetic]") {
  auto [bootstrap, ready] = dedloc::test::start_ready({dedloc::test::binary_path("tools/dedloc-dht/dedloc-dht"),
                                                       "--log-level", "warning", "serve", "--listen", "tcp://127.0.0.1:0"});
  const std::string address = ready["endpoints"][0].get<std::string>();
  // Five trainers in groups of 4: two buckets of about 3 (0.8 of a group), whose carriers meet in a group of 2.
  const std::string recipe = dedloc::test::write_recipe_variant(
      "recipes/synthetic.yaml", dedloc::test::make_temp_dir("dedloc-buckets"), "synthetic.yaml",
      {{"parameters: 1000000 ", "parameters: 200000 "},
       {"target_batch_size: 512 ", "target_batch_size: 160 "},
       {"micro_batch_size: 16 ", "micro_batch_size: 8 "},
       {"target_group_size: 16\n", "target_group_size: 4\n"},
       {"matchmaking_time: 2\n", "matchmaking_time: 1\n"},
       {"schedule:\n", "collaboration:\n  sit_out_missed_rounds: true\nschedule:\n"}});

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
