// Churn, with real processes: three dedloc-train peers on recipes/mlp.yaml; one is
// SIGKILLed in the middle of an epoch, a fourth joins later. The newcomer downloads the swarm's state and
// ends at the same epoch as the survivors; the run keeps stepping through both events; the survivors keep
// averaging together; the loss keeps falling; nothing is ever non-finite.
//
// Holding the swarm's epoch number is not enough: the newcomer must hold its parameters. The trainers
// report their parameters with each step (--params-hash, docs/recipes.md): the newcomer's hash right after
// the download equals its donor's at that epoch (the transfer is exact), and after its first averaged step
// with the survivors (once they are on one model again after the kill) its parameters' norm equals theirs
// to float rounding (peers add the reducers' deltas to their own values, so averaged peers agree to about
// 1e-10, not bit for bit), while one epoch moves it far more.
//
// The peers run until the test stops them (SIGINT: each leaves cleanly), once the run is past kLastEpoch
// and the newcomer has averaged with the others: with this recipe a whole epoch takes a few hundred ms,
// so survivors given a last epoch could finish before a newcomer on a loaded machine has even started
// (it happened in CI), and there would be nobody left to download from.
#include <algorithm>
#include <cmath>
#include <csignal>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>

#include "support/process.hpp"
#include "support/test_paths.hpp"
#include "support/trainer_process.hpp"

using namespace std::chrono_literals;
using dedloc::test::TrainerArgs;
using dedloc::test::TrainerProcess;
using dedloc::test::mean_loss;
using dedloc::test::pump_until;

namespace {

constexpr std::uint64_t kLastEpoch = 30;  // the run goes at least this far
constexpr std::uint64_t kNewcomerRounds = 3;  // ... and the newcomer averages at least this often
constexpr std::uint64_t kKillAt = 6;   // the third peer dies while accumulating for the step after this
constexpr std::uint64_t kJoinAt = 12;  // the newcomer starts once the first peer is here
constexpr std::uint64_t kSurvivorRounds = 3;  // epochs after the kill at which the survivors averaged together
// Relative difference of two peers' parameter norms after averaging the same gradients from the same
// parameters: rounding alone gives about 1e-10 here, one epoch of training moves the norm by 1e-5 or more.
constexpr double kSameParameters = 1e-7;

// A dedloc-dht node that lives through the whole test: every trainer joins through it, so a newcomer can
// join whichever trainers are still there (as in scripts/train-local).
std::pair<dedloc::test::ChildProcess, std::string> start_bootstrap() {
  auto [node, ready] = dedloc::test::start_ready({dedloc::test::binary_path("tools/dedloc-dht/dedloc-dht"),
                                                  "--log-level", "warning", "serve", "--listen", "tcp://127.0.0.1:0"});
  return {std::move(node), ready["endpoints"][0].get<std::string>()};
}

// recipes/mlp.yaml with all-reduce timeouts to match its 1 s matchmaking: the third peer is killed while
// it averages (its micro-batches take milliseconds), and its group then waits these out, not 15-30 s.
std::string churn_recipe() {
  static const std::string path = dedloc::test::write_recipe_variant(
      "recipes/mlp.yaml", dedloc::test::make_temp_dir("dedloc-churn"), "mlp-churn.yaml",
      {{"  averaging_timeout: 30\n", "  averaging_timeout: 10\n  sender_timeout: 2\n  reducer_timeout: 4\n"}});
  return path;
}

TrainerProcess start(const std::string& name, const std::string& initial_peer, std::uint64_t data_seed,
                     size_t min_peers) {
  // No last epoch (the test stops the peers); max_time only bounds a test gone wrong.
  TrainerArgs args{.recipe = churn_recipe(), .initial_peer = initial_peer, .run_id = "churn",
                   .data_seed = data_seed, .max_time = 300, .min_peers = min_peers, .extra = {"--params-hash"}};
  auto trainer = TrainerProcess::start(name, args);
  REQUIRE(trainer.has_value());
  return std::move(*trainer);
}

// A peer's step and download lines by epoch (a peer that downloaded has both at that epoch).
std::multimap<std::uint64_t, nlohmann::json> by_epoch(const TrainerProcess& p) {
  std::multimap<std::uint64_t, nlohmann::json> out;
  for (const auto& e : p.events()) {
    if (e.contains("params_hash")) out.emplace(e["epoch"].get<std::uint64_t>(), e);
  }
  return out;
}

// The epochs after `killed_at` (and the one after it, whose group may still have had the killed peer) at
// which the survivors `a` and `b` averaged in one group: both averaged with the same group size, all three
// live peers together, or the two of them while the newcomer `d` did not average.
size_t epochs_averaged_together(const TrainerProcess& a, const TrainerProcess& b, const TrainerProcess& d,
                                std::uint64_t killed_at) {
  const auto a_lines = by_epoch(a), b_lines = by_epoch(b), d_lines = by_epoch(d);
  const auto averaged = [](const auto& entry) { return entry.second["event"] == "averaged"; };
  size_t together = 0;
  for (const auto& [epoch, x] : a_lines) {
    if (epoch <= killed_at + 1 || x["event"] != "averaged") continue;
    auto [b_from, b_to] = b_lines.equal_range(epoch);
    const bool b_alike = std::any_of(b_from, b_to, [&](const auto& entry) {
      return averaged(entry) && entry.second["group_size"] == x["group_size"];
    });
    auto [d_from, d_to] = d_lines.equal_range(epoch);
    const bool d_averaged = std::any_of(d_from, d_to, averaged);
    if (b_alike && (x["group_size"] == 3 || (x["group_size"] == 2 && !d_averaged))) ++together;
  }
  return together;
}

bool same_parameters(const nlohmann::json& x, const nlohmann::json& y) {
  const double a = x["params_norm"].get<double>(), b = y["params_norm"].get<double>();
  return std::abs(a - b) <= kSameParameters * std::max(a, b);
}

// The newcomer's first averaged step at an epoch where the swarm held one model: both survivors averaged
// there, to the same parameters, and the newcomer's group was theirs. Right after the kill the survivors
// may each step alone (their round waited on the dead peer) and stay apart until a resync
// (collab/divergence.hpp) brings them back; a group mate then says nothing about the swarm's model.
struct StepWithTheSwarm {
  nlohmann::json newcomer, survivor;
};
std::optional<StepWithTheSwarm> newcomer_step_with_one_model(const TrainerProcess& a, const TrainerProcess& b,
                                                             const TrainerProcess& d) {
  const auto a_lines = by_epoch(a), b_lines = by_epoch(b);
  const auto averaged_at = [](const auto& lines, std::uint64_t epoch) -> std::optional<nlohmann::json> {
    auto [from, to] = lines.equal_range(epoch);
    for (auto it = from; it != to; ++it) {
      if (it->second["event"] == "averaged") return it->second;
    }
    return std::nullopt;
  };
  for (const auto& [epoch, step] : by_epoch(d)) {
    if (step["event"] != "averaged") continue;
    const auto x = averaged_at(a_lines, epoch), y = averaged_at(b_lines, epoch);
    if (!x || !y || !same_parameters(*x, *y)) continue;
    if ((*x)["group"] == step["group"] || (*y)["group"] == step["group"]) return StepWithTheSwarm{step, *x};
  }
  return std::nullopt;
}

// What a failed wait shows: how far each peer came, and its last steps.
std::string where_they_are(const TrainerProcess& a, const TrainerProcess& b, const TrainerProcess& d,
                           std::uint64_t killed_at) {
  std::ostringstream out;
  out << "c killed at epoch " << killed_at << "; survivors averaged together at "
      << epochs_averaged_together(a, b, d, killed_at) << " epochs since; newcomer on one model with them: "
      << (newcomer_step_with_one_model(a, b, d).has_value() ? "yes" : "no");
  for (const auto* p : {&a, &b, &d}) {
    out << "\n" << p->name() << ": epoch " << p->epoch() << ", averaged " << p->averaged_rounds()
        << " rounds; last events:";
    const auto& events = p->events();
    for (size_t i = events.size() > 12 ? events.size() - 12 : 0; i < events.size(); ++i) out << "\n  " << events[i];
  }
  return out.str();
}

}  // namespace

TEST_CASE("A run survives a trainer SIGKILLed mid-epoch and a newcomer catches up by downloading state",
          "[proc][train][churn]") {
  auto [bootstrap, address] = start_bootstrap();
  auto a = start("a", address, 1, 3);  // the first three start together
  auto b = start("b", address, 2, 3);
  auto c = start("c", address, 3, 3);

  // Let the three peers step together, then kill the third between two of its steps.
  REQUIRE(pump_until({&a, &b, &c}, 120s, [&] { return c.epoch() >= kKillAt; }));
  std::this_thread::sleep_for(200ms);  // into the next epoch's micro-batches
  c.process().kill(SIGKILL);
  REQUIRE(c.process().wait(10s) == 128 + SIGKILL);
  c.pump(100ms);  // the lines it wrote before dying: its last step is the epoch of the kill
  const std::uint64_t epoch_at_kill = c.epoch();

  REQUIRE(pump_until({&a, &b}, 120s, [&] { return a.epoch() >= kJoinAt; }));
  auto d = start("d", address, 4, 1);
  const std::uint64_t epoch_at_join = a.epoch();

  // Stop once the run is far enough, the survivors have averaged together since the kill, and the three are
  // in step. A peer may lag two epochs for a moment (it
  // then downloads the state, retrying every few seconds), so stopping at an arbitrary moment could catch
  // one mid-way; the swarm must come back together within the deadline.
  const auto in_step = [&] {
    const auto [low, high] = std::minmax({a.epoch(), b.epoch(), d.epoch()});
    return high <= low + 1;
  };
  const bool went_on = pump_until({&a, &b, &d}, 180s, [&] {
    return a.epoch() >= kLastEpoch && b.epoch() >= kLastEpoch && d.averaged_rounds() >= kNewcomerRounds && in_step() &&
           epochs_averaged_together(a, b, d, epoch_at_kill) >= kSurvivorRounds &&
           newcomer_step_with_one_model(a, b, d).has_value();
  });
  if (!went_on) FAIL("the run did not come back together within 180 s\n" << where_they_are(a, b, d, epoch_at_kill));
  for (auto* p : {&a, &b, &d}) p->process().kill(SIGINT);
  REQUIRE(pump_until({&a, &b, &d}, 60s, [&] { return a.find("exit") && b.find("exit") && d.find("exit"); }));
  for (auto* p : {&a, &b, &d}) CHECK(p->process().wait(10s) == 130);  // left cleanly when asked

  // The newcomer loaded the swarm's state instead of starting from epoch 0, and finished where the others did.
  auto loaded = d.find("loaded_state");
  REQUIRE(loaded.has_value());
  INFO("a at epoch " << epoch_at_kill << " when c was killed, " << epoch_at_join << " when d joined; d loaded epoch "
                     << (*loaded)["epoch"]);
  CHECK((*loaded)["epoch"].get<std::uint64_t>() >= epoch_at_join);
  // All three stopped at the same epoch (one apart at most: SIGINT may land between two peers' steps).
  const auto final_epoch = [](TrainerProcess& p) { return (*p.find("exit"))["epoch"].get<std::uint64_t>(); };
  for (auto* p : {&a, &b, &d}) {
    INFO("peer " << p->name() << " ended at epoch " << final_epoch(*p) << ", a at " << final_epoch(a));
    CHECK(final_epoch(*p) >= kLastEpoch);
    CHECK(final_epoch(*p) + 1 >= final_epoch(a));
    CHECK(final_epoch(a) + 1 >= final_epoch(*p));
    CHECK((*p->find("exit"))["steps_skipped"].get<std::uint64_t>() == 0);
  }
  CHECK(d.find("exit").value()["states_loaded"].get<std::uint64_t>() >= 1);
  CHECK(d.averaged_rounds() >= kNewcomerRounds);  // it trained with the others, not beside them

  // The newcomer holds the swarm's parameters: what it loaded is bit for bit what a survivor held at that
  // epoch, and at its first averaged step with the survivors on one model it is where they are.
  const auto a_lines = by_epoch(a), b_lines = by_epoch(b);
  const auto loaded_epoch = (*loaded)["epoch"].get<std::uint64_t>();
  const auto held_by_survivor = [&](const std::string& hash) {
    for (const auto* lines : {&a_lines, &b_lines}) {
      auto [from, to] = lines->equal_range(loaded_epoch);
      for (auto it = from; it != to; ++it) {
        if (it->second["params_hash"] == hash) return true;
      }
    }
    return false;
  };
  INFO("d loaded " << *loaded);
  CHECK(held_by_survivor((*loaded)["params_hash"].get<std::string>()));
  // (The run went on until this step came, so it is there unless the wait above timed out.)
  const auto with_swarm = newcomer_step_with_one_model(a, b, d);
  REQUIRE(with_swarm.has_value());
  const auto& step = with_swarm->newcomer;
  INFO("d's first averaged step with the survivors on one model: " << step << "; a survivor's: " << with_swarm->survivor);
  CHECK(same_parameters(step, with_swarm->survivor));
  // ... which a newcomer that only took the epoch number would fail: it would hold the initial parameters,
  // and one averaged step from them leaves them where the survivors were after their first step.
  REQUIRE(a_lines.count(1) == 1);
  CHECK_FALSE(same_parameters(step, a_lines.find(1)->second));

  // The survivors kept averaging with each other after the kill (the run went on until they had, so this
  // holds unless the wait above timed out).
  INFO("c killed at epoch " << epoch_at_kill);
  CHECK(epochs_averaged_together(a, b, d, epoch_at_kill) >= kSurvivorRounds);

  // The survivors kept stepping to the last epoch, with finite losses; one that fell two epochs behind
  // (stuck in a round with the killed peer until its timeouts) may skip ahead by downloading the state.
  for (auto* p : {&a, &b}) {
    INFO("peer " << p->name());
    auto steps = p->steps();
    REQUIRE(!steps.empty());
    const std::uint64_t last = steps.back()["epoch"].get<std::uint64_t>();
    CHECK(last >= kLastEpoch);
    if (steps.size() < last) CHECK(p->find("loaded_state").has_value());
    std::uint64_t previous = 0;
    for (const auto& s : steps) {
      CHECK(s["epoch"].get<std::uint64_t>() > previous);
      previous = s["epoch"].get<std::uint64_t>();
      CHECK(std::isfinite(s["loss"].get<double>()));
    }
    // The loss keeps falling: by the kill, and by the end, against the start. (Not the end against the
    // kill: with this recipe a peer gathers a whole global batch in milliseconds, so after a missed group
    // peers can stay out of phase and step alone for a while, and a peer's loss on its own micro-batches
    // wanders between 0.03 and 0.2 from there on.)
    const auto before = mean_loss(steps, 1, 3);
    const auto around_kill = mean_loss(steps, epoch_at_kill, epoch_at_kill + 2);
    const auto late = mean_loss(steps, last - 2, last);
    REQUIRE((before && around_kill && late));
    WARN("peer " << p->name() << " loss " << *before << " (epochs 1-3) -> " << *around_kill << " (at the kill) -> "
                 << *late << " (epochs " << last - 2 << "-" << last << ")");
    CHECK(*around_kill < 0.8 * *before);
    CHECK(*late < 0.5 * *before);
  }
  for (const auto& s : d.steps()) CHECK(std::isfinite(s["loss"].get<double>()));
}
