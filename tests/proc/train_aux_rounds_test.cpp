// An aux peer is in the trainers' groups round after round, with real processes: three dedloc-train peers
// on the synthetic task and one `dedloc-avg aux`. Nobody waits for an aux peer (a group forms once its
// expected trainers are in), so it must be looking when the trainers start, for their round, not for the one
// it just reduced, and not long before them (collab/aux_timing.hpp; its rules are unit-tested in
// tests/unit/collab/aux_timing_test.cpp). Here a batch takes about as long to compute as the matchmaking
// time, as in bench/lab's paper scenarios, and the aux peer times its search from the trainers' records
// and the batch size their metrics records give: an aux peer that waited too long, or looked for the wrong
// round, would be missing from the groups.
#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "support/process.hpp"
#include "support/test_paths.hpp"
#include "support/trainer_process.hpp"

using namespace std::chrono_literals;
using dedloc::test::TrainerArgs;
using dedloc::test::TrainerProcess;
using dedloc::test::pump_until;

namespace {

constexpr size_t kTrainers = 3;
constexpr std::uint64_t kEpochs = 10;

std::string recipe() {
  // 3 peers × 40 samples/s gather 240 samples in 2 s, the matchmaking time.
  return dedloc::test::write_recipe_variant(
      "recipes/synthetic.yaml", dedloc::test::make_temp_dir("dedloc-aux-rounds"), "aux.yaml",
      {{"parameters: 1000000 ", "parameters: 100000 "},
       {"target_batch_size: 512 ", "target_batch_size: 240 "},
       {"micro_batch_size: 16 ", "micro_batch_size: 8 "}});
}

}  // namespace

TEST_CASE("An aux peer reduces in the trainers' group round after round", "[proc][train][aux]") {
  auto [bootstrap, ready] = dedloc::test::start_ready({dedloc::test::binary_path("tools/dedloc-dht/dedloc-dht"),
                                                       "--log-level", "warning", "serve", "--listen", "tcp://127.0.0.1:0"});
  const std::string address = ready["endpoints"][0].get<std::string>();
  const std::string path = recipe();
  auto [aux, aux_ready] = dedloc::test::start_ready(
      {dedloc::test::binary_path("tools/dedloc-avg/dedloc-avg"), "--log-level", "warning", "aux", "--run", "synthetic",
       "--initial-peers", address, "--listen", "tcp://127.0.0.1:0", "--target-group-size", "16",
       "--matchmaking-time", "2"});
  CHECK(aux_ready["role"] == "aux");
  std::vector<TrainerProcess> trainers;
  for (size_t i = 0; i < kTrainers; ++i) {
    TrainerArgs args{.recipe = path, .initial_peer = address, .data_seed = i + 1, .max_epochs = kEpochs,
                     .max_time = 120, .min_peers = kTrainers, .extra = {"--compute-rate", "40"}};
    auto trainer = TrainerProcess::start(std::string(1, static_cast<char>('a' + i)), args);
    REQUIRE(trainer.has_value());
    trainers.push_back(std::move(*trainer));
  }
  std::vector<TrainerProcess*> all;
  for (auto& t : trainers) all.push_back(&t);
  REQUIRE(pump_until(all, 150s, [&] {
    return std::all_of(trainers.begin(), trainers.end(), [](const TrainerProcess& t) { return t.epoch() >= kEpochs; });
  }));
  for (auto& t : trainers) {
    CHECK(t.process().wait(30s) == 0);
    t.pump(100ms);
  }
  // The steps after the first (the peers start a moment apart), as the first trainer saw them.
  size_t steps = 0;
  size_t with_aux = 0;
  std::vector<int> sizes;
  for (const auto& s : trainers[0].steps()) {
    if (s["event"] != "averaged" || s["epoch"].get<std::uint64_t>() < 2) continue;
    ++steps;
    sizes.push_back(s["group_size"].get<int>());
    with_aux += s["group_size"].get<size_t>() == kTrainers + 1;
  }
  INFO("group sizes, epoch 2 on: " << Catch::Detail::stringify(sizes));
  REQUIRE(steps >= kEpochs - 3);
  // All but one or two rounds have the aux peer (one may form while it is between two reads of the records).
  CHECK(with_aux + 2 >= steps);
}
