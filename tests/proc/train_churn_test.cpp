// Issue 5's churn "must show", with real processes: three dedloc-train peers on recipes/mlp.yaml; one is
// SIGKILLed in the middle of an epoch, a fourth joins later. The newcomer downloads the swarm's state and
// ends at the same epoch as the survivors; the run keeps stepping through both events; the loss keeps
// falling; nothing is ever non-finite.
#include <cmath>
#include <csignal>
#include <thread>

#include <catch2/catch.hpp>

#include "support/trainer_process.hpp"

using namespace std::chrono_literals;
using dedloc::test::TrainerArgs;
using dedloc::test::TrainerProcess;
using dedloc::test::mean_loss;
using dedloc::test::pump_until;

namespace {

constexpr std::uint64_t kLastEpoch = 30;
constexpr std::uint64_t kKillAt = 6;   // the third peer dies while accumulating for the step after this
constexpr std::uint64_t kJoinAt = 12;  // the newcomer starts once the first peer is here

TrainerProcess start(const std::string& name, const std::string& initial_peer, std::uint64_t data_seed,
                     size_t min_peers) {
  TrainerArgs args{.recipe = "recipes/mlp.yaml", .initial_peer = initial_peer, .run_id = "churn",
                   .data_seed = data_seed, .max_epochs = kLastEpoch, .min_peers = min_peers};
  auto trainer = TrainerProcess::start(name, args);
  REQUIRE(trainer.has_value());
  return std::move(*trainer);
}

}  // namespace

TEST_CASE("A run survives a trainer SIGKILLed mid-epoch and a newcomer catches up by downloading state",
          "[proc][train][churn]") {
  auto a = start("a", "", 1, 3);  // the first three start together
  auto b = start("b", a.address(), 2, 3);
  auto c = start("c", a.address(), 3, 3);

  // Let the three peers step together, then kill the third between two of its steps.
  REQUIRE(pump_until({&a, &b, &c}, 120s, [&] { return c.epoch() >= kKillAt; }));
  std::this_thread::sleep_for(200ms);  // into the next epoch's micro-batches
  c.process().kill(SIGKILL);
  REQUIRE(c.process().wait(10s) == 128 + SIGKILL);
  const std::uint64_t epoch_at_kill = a.epoch();

  REQUIRE(pump_until({&a, &b}, 120s, [&] { return a.epoch() >= kJoinAt; }));
  auto d = start("d", b.address(), 4, 1);
  const std::uint64_t epoch_at_join = a.epoch();

  REQUIRE(pump_until({&a, &b, &d}, 180s, [&] { return a.find("exit") && b.find("exit") && d.find("exit"); }));
  CHECK(a.process().wait(10s) == 0);
  CHECK(b.process().wait(10s) == 0);
  CHECK(d.process().wait(10s) == 0);

  // The newcomer loaded the swarm's state instead of starting from epoch 0, and finished where the others did.
  auto loaded = d.find("loaded_state");
  REQUIRE(loaded.has_value());
  INFO("a at epoch " << epoch_at_kill << " when c was killed, " << epoch_at_join << " when d joined; d loaded epoch "
                     << (*loaded)["epoch"]);
  CHECK((*loaded)["epoch"].get<std::uint64_t>() >= epoch_at_join);
  for (auto* p : {&a, &b, &d}) {
    INFO("peer " << p->name());
    auto exit = *p->find("exit");
    CHECK(exit["epoch"].get<std::uint64_t>() == kLastEpoch);
    CHECK(exit["steps_skipped"].get<std::uint64_t>() == 0);
  }
  CHECK(d.find("exit").value()["states_loaded"].get<std::uint64_t>() >= 1);

  // The survivors stepped through every epoch, with finite losses, averaging with the newcomer.
  for (auto* p : {&a, &b}) {
    INFO("peer " << p->name());
    auto steps = p->steps();
    CHECK(steps.size() == kLastEpoch);
    std::uint64_t expected = 1, in_a_group_of_3_after_join = 0;
    for (const auto& s : steps) {
      CHECK(s["epoch"].get<std::uint64_t>() == expected++);
      CHECK(std::isfinite(s["loss"].get<double>()));
      if (s["epoch"].get<std::uint64_t>() > epoch_at_join && s.value("group_size", 0) == 3) ++in_a_group_of_3_after_join;
    }
    CHECK(in_a_group_of_3_after_join > 0);
    // The loss keeps falling: before the kill, around it, and at the end.
    const auto before = mean_loss(steps, 1, 3);
    const auto around_kill = mean_loss(steps, epoch_at_kill, epoch_at_kill + 2);
    const auto late = mean_loss(steps, kLastEpoch - 2, kLastEpoch);
    REQUIRE((before && around_kill && late));
    WARN("peer " << p->name() << " loss " << *before << " (epochs 1-3) -> " << *around_kill << " (at the kill) -> "
                 << *late << " (epochs " << kLastEpoch - 2 << "-" << kLastEpoch << ")");
    CHECK(*around_kill < 0.8 * *before);
    CHECK(*late < 0.8 * *around_kill);
  }
  for (const auto& s : d.steps()) CHECK(std::isfinite(s["loss"].get<double>()));
}
