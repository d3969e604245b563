// Periodic parameter averaging (training.average_parameters_every) repairs drift between peers. Two
// dedloc-train processes start from different initial parameters (recipes that differ only in `seed`, so
// the run's schema matches). Gradient averaging alone applies the same update to both, so the difference
// stays; with parameter averaging every 2 epochs, both end with the same parameters.
#include <algorithm>
#include <cmath>

#include <catch2/catch.hpp>

#include "dedloc/collab/checkpoint.hpp"
#include "support/test_paths.hpp"
#include "support/trainer_process.hpp"

using namespace std::chrono_literals;
using dedloc::test::TrainerArgs;
using dedloc::test::TrainerProcess;
using dedloc::test::pump_until;

namespace {

constexpr std::uint64_t kEpochs = 6;

// recipes/mlp.yaml with another initial seed and parameter averaging every `every` epochs (0: none).
std::string write_recipe(const std::string& dir, const std::string& name, int seed, int every) {
  return dedloc::test::write_recipe_variant(
      "recipes/mlp.yaml", dir, name,
      {{"seed: 1 ", "seed: " + std::to_string(seed) + " "},
       {"training:\n", "training:\n  average_parameters_every: " + std::to_string(every) + "\n"}});
}

// Runs two peers for kEpochs and returns the largest parameter difference between their final models.
double final_difference(int every) {
  const std::string dir = dedloc::test::make_temp_dir("dedloc-param-avg");
  const std::string run_id = "drift-" + std::to_string(every);
  TrainerArgs a_args{.recipe = write_recipe(dir, "a.yaml", 1, every), .run_id = run_id, .data_seed = 1,
                     .max_epochs = kEpochs, .min_peers = 2, .checkpoint_dir = dir + "/a"};
  auto a = TrainerProcess::start("a", a_args);
  REQUIRE(a.has_value());
  TrainerArgs b_args = a_args;
  b_args.recipe = write_recipe(dir, "b.yaml", 2, every);
  b_args.initial_peer = a->address();
  b_args.data_seed = 2;
  b_args.checkpoint_dir = dir + "/b";
  auto b = TrainerProcess::start("b", b_args);
  REQUIRE(b.has_value());
  REQUIRE(pump_until({&*a, &*b}, 120s, [&] { return a->find("exit") && b->find("exit"); }));
  REQUIRE(a->process().wait(30s) == 0);
  REQUIRE(b->process().wait(30s) == 0);
  for (const auto& s : a->steps()) CHECK(s["event"] == "averaged");  // the same gradients every step

  auto model_a = dedloc::collab::load_checkpoint(dir + "/a/model.safetensors");
  auto model_b = dedloc::collab::load_checkpoint(dir + "/b/model.safetensors");
  REQUIRE(model_a.is_ok());
  REQUIRE(model_b.is_ok());
  REQUIRE(model_a->state.total_elements() == model_b->state.total_elements());
  double difference = 0;
  auto x = model_a->state.flat(), y = model_b->state.flat();
  for (size_t i = 0; i < x.size(); ++i) difference = std::max(difference, std::abs(double(x[i]) - double(y[i])));
  return difference;
}

}  // namespace

TEST_CASE("Parameter averaging every 2 epochs brings peers that started apart to the same parameters",
          "[proc][train][drift]") {
  const double without = final_difference(0);
  const double with = final_difference(2);
  WARN("largest parameter difference after " << kEpochs << " epochs: " << without << " with gradient averaging only, "
                                             << with << " with parameter averaging every 2 epochs");
  CHECK(without > 0.01);  // the initial difference stays: the drift is real
  CHECK(with < 1e-6);
}
