// Delayed mode with real processes (collaboration.mode delayed, train/collaboration_mode.hpp): two dedloc-train
// peers train recipes/mlp.yaml, averaging each global batch in the background while they compute the next.
// Every step is still averaged and applied by both, in order, to the bit (the same average on the same
// parameters), the loss falls, and the steps really overlapped: when a step is reported, the peer has
// already computed samples of the next batch.
#include <cmath>
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

constexpr std::uint64_t kLastEpoch = 12;

std::string delayed_recipe() {
  static const std::string path = dedloc::test::write_recipe_variant(
      "recipes/mlp.yaml", dedloc::test::make_temp_dir("dedloc-delayed"), "mlp-delayed.yaml",
      {{"  target_batch_size: 256", "  target_batch_size: 65536"},
       {"optimizer:", "collaboration: {mode: delayed}\noptimizer:"}});
  return path;
}

TrainerArgs peer(const std::string& bootstrap, std::uint64_t seed) {
  return TrainerArgs{.recipe = delayed_recipe(), .initial_peer = bootstrap, .data_seed = seed, .extra = {"--params-hash"}};
}

}  // namespace

TEST_CASE("Delayed mode: each global batch averages while the next computes, and both peers apply the same steps",
          "[proc][train]") {
  auto [bootstrap, ready] = dedloc::test::start_ready({dedloc::test::binary_path("tools/dedloc-dht/dedloc-dht"),
                                                       "--log-level", "warning", "serve", "--listen", "tcp://127.0.0.1:0"});
  const std::string address = ready["endpoints"][0].get<std::string>();
  TrainerArgs first = peer(address, 1);
  first.min_peers = 2;
  auto a = TrainerProcess::start("a", first);
  REQUIRE(a.has_value());
  auto b = TrainerProcess::start("b", peer(address, 2));
  REQUIRE(b.has_value());
  REQUIRE(pump_until({&*a, &*b}, 150s, [&] { return a->epoch() >= kLastEpoch && b->epoch() >= kLastEpoch; }));
  for (auto* p : {&*a, &*b}) p->process().kill(SIGINT);
  for (auto* p : {&*a, &*b}) {
    CHECK(p->process().wait(30s).has_value());
    p->pump(100ms);
  }

  for (auto* p : {&*a, &*b}) {
    INFO(p->name());
    const auto steps = p->steps();
    REQUIRE(steps.size() >= kLastEpoch);
    // Epochs in order, one step each, every one averaged once both peers are in.
    std::uint64_t applied_samples = 0, epoch = steps.front()["epoch"].get<std::uint64_t>() - 1;
    size_t averaged = 0, overlapped = 0;
    for (const auto& s : steps) {
      CHECK(s["epoch"].get<std::uint64_t>() == ++epoch);
      CHECK(std::isfinite(s["loss"].get<double>()));
      if (s["event"] == "averaged") ++averaged;
      applied_samples += s["samples"].get<std::uint64_t>();
      // Computed beyond the samples of the steps applied so far: the next batch was under way.
      if (s["samples_computed"].get<std::uint64_t>() > applied_samples) ++overlapped;
    }
    CHECK(averaged + 1 >= steps.size());
    CHECK(overlapped * 2 >= steps.size());
    CHECK(steps.back()["loss"].get<double>() < steps.front()["loss"].get<double>());
  }
  const auto together = dedloc::test::steps_averaged_together(*a, *b);
  for (const auto& [s, t] : together) {
    INFO("epoch " << s["epoch"]);
    CHECK(t["params_hash"] == s["params_hash"]);
  }
  CHECK(together.size() + 2 >= kLastEpoch);
}
