// DiLoCo under churn, with real processes (collaboration.mode diloco, train/collaboration_mode.hpp): three
// dedloc-train peers train recipes/mlp.yaml in DiLoCo mode; one is SIGKILLed during an outer phase and a
// fourth joins later. The newcomer downloads θ_outer and the outer momentum, reaches the swarm's outer
// epoch, and from its first averaged outer step on its θ_outer hashes equal a group mate's (the all-reduce
// hands every member the same average, and the outer step rounds the same everywhere); the survivors keep
// averaging; no loss is ever non-finite.
#include <cmath>
#include <csignal>
#include <map>
#include <set>

#include <catch2/catch.hpp>

#include "support/process.hpp"
#include "support/test_paths.hpp"
#include "support/trainer_process.hpp"

using namespace std::chrono_literals;
using dedloc::test::TrainerArgs;
using dedloc::test::TrainerProcess;
using dedloc::test::pump_until;

namespace {

constexpr std::uint64_t kKillAt = 3;   // the third peer dies during the outer phase after this epoch
constexpr std::uint64_t kJoinAt = 5;   // the newcomer starts once the first peer is here
constexpr std::uint64_t kLastEpoch = 12;

// recipes/mlp.yaml in DiLoCo mode: an outer batch of 8 global batches (2,048 samples, a fraction of a
// second here), inner steps every 128 samples, short all-reduce timeouts for the round the killed peer leaves.
std::string diloco_recipe() {
  static const std::string path = dedloc::test::write_recipe_variant(
      "recipes/mlp.yaml", dedloc::test::make_temp_dir("dedloc-diloco"), "mlp-diloco.yaml",
      {{"  target_batch_size: 256", "  target_batch_size: 2048"},
       {"optimizer:", "collaboration: {mode: diloco, inner_batch_size: 128}\noptimizer:"},
       {"  averaging_timeout: 30\n", "  averaging_timeout: 10\n  sender_timeout: 2\n  reducer_timeout: 4\n"}});
  return path;
}

TrainerArgs peer(const std::string& bootstrap, std::uint64_t seed) {
  return TrainerArgs{.recipe = diloco_recipe(), .initial_peer = bootstrap, .data_seed = seed, .extra = {"--params-hash"}};
}

}  // namespace

TEST_CASE("DiLoCo under churn: a killed peer and a late joiner that downloads θ_outer and its momentum",
          "[proc][train][diloco]") {
  auto [bootstrap, ready] = dedloc::test::start_ready({dedloc::test::binary_path("tools/dedloc-dht/dedloc-dht"),
                                                       "--log-level", "warning", "serve", "--listen", "tcp://127.0.0.1:0"});
  const std::string address = ready["endpoints"][0].get<std::string>();
  TrainerArgs first = peer(address, 1);
  first.min_peers = 3;
  auto a = TrainerProcess::start("a", first);
  REQUIRE(a.has_value());
  auto b = TrainerProcess::start("b", peer(address, 2));
  REQUIRE(b.has_value());
  auto c = TrainerProcess::start("c", peer(address, 3));
  REQUIRE(c.has_value());

  REQUIRE(pump_until({&*a, &*b, &*c}, 120s, [&] { return c->epoch() >= kKillAt; }));
  c->process().kill(SIGKILL);
  REQUIRE(pump_until({&*a, &*b}, 120s, [&] { return a->epoch() >= kJoinAt; }));
  auto d = TrainerProcess::start("d", peer(address, 4));
  REQUIRE(d.has_value());
  REQUIRE(pump_until({&*a, &*b, &*d}, 180s, [&] {
    return a->epoch() >= kLastEpoch && d->averaged_rounds() >= 2;
  }));
  for (auto* p : {&*a, &*b, &*d}) p->process().kill(SIGINT);
  for (auto* p : {&*a, &*b, &*d}) {
    CHECK(p->process().wait(30s).has_value());
    p->pump(100ms);
  }

  // The newcomer downloaded the swarm's outer state, at an outer epoch past the one it joined at.
  auto loaded = d->find("loaded_state");
  REQUIRE(loaded.has_value());
  INFO(loaded->dump());
  CHECK(loaded->at("epoch").get<std::uint64_t>() >= kJoinAt);
  // After its first averaged outer step it holds a group mate's θ_outer to the bit (θ_local = θ_outer right
  // after the step, which is what the hash covers), and so it stays at every later outer step that they
  // averaged together in full. A mate, not every mate: when c was SIGKILLed in the middle of a round, a
  // survivor that gave up on its reducer kept its own values for that share, and a and b can hold
  // different θ_outer from then on (a fresh-clone run saw b apart from a and the newcomer); the newcomer
  // still matches the mate it agrees with, to the bit, step after step.
  std::optional<nlohmann::json> joined_step;
  for (const auto& s : d->steps()) {
    if (s["event"] == "averaged") {
      joined_step = s;
      break;
    }
  }
  REQUIRE(joined_step.has_value());
  std::map<std::uint64_t, std::set<std::string>> mates_hashes;  // per epoch the newcomer averaged with a mate
  std::map<std::uint64_t, std::string> own_hash;
  for (auto* mate : {&*a, &*b}) {
    for (const auto& [own, s] : dedloc::test::steps_averaged_together(*d, *mate)) {
      mates_hashes[own["epoch"].get<std::uint64_t>()].insert(s["params_hash"].get<std::string>());
      own_hash[own["epoch"].get<std::uint64_t>()] = own["params_hash"].get<std::string>();
    }
  }
  size_t compared = 0, compared_at_join = 0;
  for (const auto& [epoch, hashes] : mates_hashes) {
    INFO("epoch " << epoch << ": the newcomer's hash " << own_hash[epoch] << ", its mates' " << nlohmann::json(hashes).dump());
    CHECK(hashes.count(own_hash[epoch]) == 1);
    ++compared;
    if (epoch == joined_step->at("epoch").get<std::uint64_t>()) ++compared_at_join;
  }
  CHECK(compared_at_join >= 1);
  CHECK(compared >= 2);
  // The survivors averaged together after the kill, and nothing was ever non-finite.
  size_t survivors_averaged = 0;
  for (auto* p : {&*a, &*b, &*d}) {
    for (const auto& s : p->steps()) {
      CHECK(std::isfinite(s["loss"].get<double>()));
      if (p != &*d && s["event"] == "averaged" && s["epoch"].get<std::uint64_t>() > kKillAt + 1) ++survivors_averaged;
    }
  }
  CHECK(survivors_averaged >= 4);
}
