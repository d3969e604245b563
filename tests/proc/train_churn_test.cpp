// Issue 5's churn "must show", with real processes: three dedloc-train peers on recipes/mlp.yaml; one is
// SIGKILLed in the middle of an epoch, a fourth joins later. The newcomer downloads the swarm's state and
// ends at the same epoch as the survivors; the run keeps stepping through both events; the loss keeps
// falling; nothing is ever non-finite.
#include <cmath>
#include <csignal>
#include <optional>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace std::chrono_literals;
using dedloc::test::ChildProcess;
using nlohmann::json;

namespace {

constexpr std::uint64_t kLastEpoch = 30;
constexpr std::uint64_t kKillAt = 6;   // the third peer dies while accumulating for the step after this
constexpr std::uint64_t kJoinAt = 12;  // the newcomer starts once the first peer is here

// One dedloc-train process and the JSON lines it printed (--json: ready, one per step, exit).
struct Peer {
  std::string name;
  ChildProcess process;
  std::vector<json> events;
  std::string address;  // from the ready line

  static Peer start(const std::string& name, const std::string& initial_peer, int data_seed, int min_peers) {
    std::vector<std::string> args{dedloc::test::binary_path("tools/dedloc-train/dedloc-train"),
                                  "--recipe", dedloc::test::source_path("recipes/mlp.yaml"),
                                  "--listen", "tcp://127.0.0.1:0", "--avg-listen", "tcp://127.0.0.1:0",
                                  "--threads", "1", "--max-epochs", std::to_string(kLastEpoch),
                                  "--data-seed", std::to_string(data_seed), "--json", "--log-level", "warning",
                                  "--run-id", "churn", "--min-peers", std::to_string(min_peers)};
    if (!initial_peer.empty()) args.insert(args.end(), {"--initial-peers", initial_peer});
    Peer peer{name, ChildProcess::spawn(args), {}, {}};
    // A peer joining a run past epoch 0 reports the state it downloaded before it is ready.
    while (peer.address.empty()) {
      auto text = peer.process.read_line(60s);
      REQUIRE(text.has_value());
      auto line = json::parse(*text);
      if (line.value("ready", false)) {
        peer.address = line["endpoints"][0].get<std::string>();
      } else {
        peer.events.push_back(line);
      }
    }
    return peer;
  }

  // Reads whatever lines arrive within `wait`.
  void pump(dedloc::Duration wait) {
    while (auto line = process.read_line(wait)) {
      events.push_back(json::parse(*line));
      wait = 1ms;
    }
  }

  // The epoch of the latest step this peer reported (0 before its first).
  std::uint64_t epoch() const {
    for (auto it = events.rbegin(); it != events.rend(); ++it) {
      if (it->contains("epoch")) return (*it)["epoch"].get<std::uint64_t>();
    }
    return 0;
  }

  std::vector<json> steps() const {
    std::vector<json> out;
    for (const auto& e : events) {
      auto kind = e.value("event", "");
      if (kind == "averaged" || kind == "alone" || kind == "skipped") out.push_back(e);
    }
    return out;
  }

  std::optional<json> find(const std::string& kind) const {
    for (const auto& e : events) {
      if (e.value("event", "") == kind) return e;
    }
    return std::nullopt;
  }
};

// Pumps every peer until `done` holds or `timeout` passes.
template <typename Done>
bool pump_until(std::vector<Peer*> peers, dedloc::Duration timeout, Done done) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    for (auto* p : peers) p->pump(20ms);
    if (done()) return true;
  }
  return false;
}

double mean_loss(const std::vector<json>& steps, std::uint64_t first_epoch, std::uint64_t last_epoch) {
  double sum = 0;
  int n = 0;
  for (const auto& s : steps) {
    auto epoch = s["epoch"].get<std::uint64_t>();
    if (epoch >= first_epoch && epoch <= last_epoch) {
      sum += s["loss"].get<double>();
      ++n;
    }
  }
  REQUIRE(n > 0);
  return sum / n;
}

}  // namespace

TEST_CASE("A run survives a trainer SIGKILLed mid-epoch and a newcomer catches up by downloading state",
          "[proc][train][churn]") {
  Peer a = Peer::start("a", "", 1, 3);  // the first three start together
  Peer b = Peer::start("b", a.address, 2, 3);
  Peer c = Peer::start("c", a.address, 3, 3);

  // Let the three peers step together, then kill the third between two of its steps.
  REQUIRE(pump_until({&a, &b, &c}, 120s, [&] { return c.epoch() >= kKillAt; }));
  std::this_thread::sleep_for(200ms);  // into the next epoch's micro-batches
  c.process.kill(SIGKILL);
  REQUIRE(c.process.wait(10s) == 128 + SIGKILL);
  const std::uint64_t epoch_at_kill = a.epoch();

  REQUIRE(pump_until({&a, &b}, 120s, [&] { return a.epoch() >= kJoinAt; }));
  Peer d = Peer::start("d", b.address, 4, 1);
  const std::uint64_t epoch_at_join = a.epoch();

  REQUIRE(pump_until({&a, &b, &d}, 180s, [&] {
    return a.find("exit").has_value() && b.find("exit").has_value() && d.find("exit").has_value();
  }));
  CHECK(a.process.wait(10s) == 0);
  CHECK(b.process.wait(10s) == 0);
  CHECK(d.process.wait(10s) == 0);

  // The newcomer loaded the swarm's state instead of starting from epoch 0, and finished where the others did.
  auto loaded = d.find("loaded_state");
  REQUIRE(loaded.has_value());
  INFO("a at epoch " << epoch_at_kill << " when c was killed, " << epoch_at_join << " when d joined; d loaded epoch "
                     << (*loaded)["epoch"]);
  CHECK((*loaded)["epoch"].get<std::uint64_t>() >= epoch_at_join);
  for (const Peer* p : {&a, &b, &d}) {
    INFO("peer " << p->name);
    auto exit = *p->find("exit");
    CHECK(exit["epoch"].get<std::uint64_t>() == kLastEpoch);
    CHECK(exit["steps_skipped"].get<std::uint64_t>() == 0);
  }
  CHECK(d.find("exit").value()["states_loaded"].get<std::uint64_t>() >= 1);

  // The survivors stepped through every epoch, together after the churn, with finite losses.
  for (const Peer* p : {&a, &b}) {
    INFO("peer " << p->name);
    auto steps = p->steps();
    CHECK(steps.size() == kLastEpoch);
    std::uint64_t expected = 1, averaged_after_join = 0;
    for (const auto& s : steps) {
      CHECK(s["epoch"].get<std::uint64_t>() == expected++);
      CHECK(std::isfinite(s["loss"].get<double>()));
      if (s["epoch"].get<std::uint64_t>() > epoch_at_join + 2 && s["event"] == "averaged") ++averaged_after_join;
    }
    CHECK(averaged_after_join >= (kLastEpoch - epoch_at_join - 2) / 2);
    // The loss keeps falling: before the kill, between the kill and the join, and after the join.
    const double before = mean_loss(steps, 1, 3);
    const double around_kill = mean_loss(steps, epoch_at_kill, epoch_at_kill + 2);
    const double late = mean_loss(steps, kLastEpoch - 2, kLastEpoch);
    WARN("peer " << p->name << " loss " << before << " (epochs 1-3) -> " << around_kill << " (at the kill) -> " << late
                 << " (epochs " << kLastEpoch - 2 << "-" << kLastEpoch << ")");
    CHECK(around_kill < 0.8 * before);
    CHECK(late < 0.8 * around_kill);
  }
  for (const auto& s : d.steps()) CHECK(std::isfinite(s["loss"].get<double>()));
}
