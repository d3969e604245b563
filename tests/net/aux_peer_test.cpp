// The aux peer's round loop (collab::AuxPeer) in-process: real loopback sockets, a real DHT swarm.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <future>
#include <thread>

#include "dedloc/collab/aux_peer.hpp"
#include "support/quiet_swarm.hpp"

using namespace dedloc;
using namespace std::chrono_literals;

namespace {

collab::AuxPeerOptions aux_options(const std::string& run_id, Logger& log) {
  collab::AuxPeerOptions options;
  options.averager.run_id = run_id;
  options.averager.listen = "tcp://127.0.0.1:0";
  options.averager.target_group_size = 3;
  options.averager.matchmaking_time = 2s;
  options.averager.part_elements = 5000;
  options.averager.log = &log;
  options.retry_interval = 200ms;
  return options;
}

}  // namespace

TEST_CASE("AuxPeer: reduces a share of two trainers' round, then stops when asked", "[net][avg][aux]") {
  Logger& quiet = test::quiet_log();
  auto swarm = test::quiet_swarm(3);
  zmq::context_t context;
  const avg::VectorSchema schema{Bytes(wire::kSchemaHashBytes, 0x6d), 30001};
  REQUIRE(avg::publish_schema(swarm->node(0), "helped", schema, 10min, Deadline::after(5s)).is_ok());

  auto aux_identity = crypto::Identity::generate();
  collab::AuxPeer aux(context, swarm->node(2), aux_identity, aux_options("helped", quiet));
  REQUIRE(aux.start().is_ok());
  CHECK_THAT(aux.endpoint(), Catch::StartsWith("tcp://127.0.0.1:"));
  std::atomic<bool> stop{false};
  auto running = std::async(std::launch::async, [&] { return aux.run([&] { return stop.load(); }); });

  std::vector<crypto::Identity> identities;
  std::vector<std::unique_ptr<avg::Averager>> trainers;
  for (size_t i = 0; i < 2; ++i) {
    avg::AveragerOptions options = aux_options("helped", quiet).averager;
    identities.push_back(crypto::Identity::generate());
    trainers.push_back(std::make_unique<avg::Averager>(context, swarm->node(i), identities.back(), options));
    REQUIRE(trainers.back()->start().is_ok());
  }
  // Member i holds (i+1)·f(k) and weighs w_i: the mean is (1·1 + 2·3)/4 = 1.75 times f(k). The trainers step
  // until a round forms with the aux peer in it (its loop may be between two searches when they start).
  const std::vector<double> weights{1, 3};
  auto f = [](size_t k) { return static_cast<float>(k % 53) - 20.0f; };
  bool helped = false;
  const Deadline give_up = Deadline::after(40s);
  while (!helped && !give_up.passed()) {
    std::vector<std::vector<float>> vectors(2, std::vector<float>(schema.length));
    for (size_t i = 0; i < 2; ++i) {
      for (size_t k = 0; k < schema.length; ++k) vectors[i][k] = static_cast<float>(i + 1) * f(k);
    }
    std::vector<std::future<Result<avg::StepOutcome>>> steps;
    for (size_t i = 0; i < 2; ++i) {
      steps.push_back(std::async(std::launch::async, [&, i] { return trainers[i]->step(schema, vectors[i], weights[i]); }));
    }
    std::vector<Result<avg::StepOutcome>> outcomes;
    for (auto& step : steps) outcomes.push_back(step.get());
    for (auto& outcome : outcomes) REQUIRE(outcome.is_ok());
    if (outcomes[0]->group_size != 3 || outcomes[1]->group_size != 3) continue;
    helped = true;
    for (size_t i = 0; i < 2; ++i) {
      INFO("trainer " << i);
      CHECK(outcomes[i]->all_reduce.averaged_fraction == 1.0);
      double worst = 0;
      for (size_t k = 0; k < schema.length; ++k) worst = std::max(worst, std::abs(vectors[i][k] - 1.75 * f(k)));
      CHECK(worst < 1e-4);
    }
  }
  REQUIRE(helped);

  // A round under way finishes first: at most the matchmaking time and an all-reduce of 30k values.
  const auto asked = std::chrono::steady_clock::now();
  stop = true;
  REQUIRE(running.wait_for(10s) == std::future_status::ready);
  CHECK(std::chrono::steady_clock::now() - asked < 5s);
  auto report = running.get();
  REQUIRE(report.is_ok());
  CHECK(report->rounds >= 1);
}

TEST_CASE("AuxPeer: waits for a layout and stops promptly while waiting", "[net][avg][aux]") {
  Logger& quiet = test::quiet_log();
  auto swarm = test::quiet_swarm(2);
  zmq::context_t context;
  auto identity = crypto::Identity::generate();
  auto options = aux_options("nobody-trains", quiet);
  options.retry_interval = 10s;  // so that only should_stop can end the wait in time
  collab::AuxPeer aux(context, swarm->node(1), identity, options);
  REQUIRE(aux.start().is_ok());
  std::atomic<bool> stop{false};
  auto running = std::async(std::launch::async, [&] { return aux.run([&] { return stop.load(); }); });
  std::this_thread::sleep_for(300ms);  // not an ordering: stopping at any moment must work
  const auto asked = std::chrono::steady_clock::now();
  stop = true;
  REQUIRE(running.wait_for(10s) == std::future_status::ready);
  CHECK(std::chrono::steady_clock::now() - asked < 3s);
  auto report = running.get();
  REQUIRE(report.is_ok());
  CHECK(report->rounds == 0);
}

TEST_CASE("AuxPeer: stops by itself after the rounds it was asked for", "[net][avg][aux]") {
  Logger& quiet = test::quiet_log();
  auto swarm = test::quiet_swarm(2);
  zmq::context_t context;
  const avg::VectorSchema schema{Bytes(wire::kSchemaHashBytes, 0x2e), 1000};
  REQUIRE(avg::publish_schema(swarm->node(0), "once", schema, 10min, Deadline::after(5s)).is_ok());
  auto aux_identity = crypto::Identity::generate();
  auto options = aux_options("once", quiet);
  options.averager.target_group_size = 2;
  options.rounds = 1;
  collab::AuxPeer aux(context, swarm->node(1), aux_identity, options);
  REQUIRE(aux.start().is_ok());
  auto running = std::async(std::launch::async, [&] { return aux.run([] { return false; }); });

  // One trainer with min_group_size 1 forms a group of two with the aux peer.
  auto trainer_identity = crypto::Identity::generate();
  avg::AveragerOptions trainer_options = options.averager;
  trainer_options.role = avg::AvgRole::kNode;
  trainer_options.min_group_size = 1;
  avg::Averager trainer(context, swarm->node(0), trainer_identity, trainer_options);
  REQUIRE(trainer.start().is_ok());
  const Deadline give_up = Deadline::after(30s);
  while (running.wait_for(0s) != std::future_status::ready && !give_up.passed()) {
    std::vector<float> vector(schema.length, 2.5f);
    auto outcome = trainer.step(schema, vector, 1);
    REQUIRE(outcome.is_ok());
    if (outcome->group_size == 2) CHECK(vector == std::vector<float>(schema.length, 2.5f));
  }
  REQUIRE(running.wait_for(10s) == std::future_status::ready);
  auto report = running.get();
  REQUIRE(report.is_ok());
  CHECK(report->rounds == 1);
}

// A trainer that dies in a round the aux peer reduces for: the aux peer pings the members it waits on
// (AuxPeerOptions::liveness_timeout), so the dead one's port refusing ends that wait at once, and the aux
// peer's share comes back averaged to the live trainers. Without the pings it waited for the dead
// trainer's parts to its sender timeout (15 s); every part it reduces stayed incomplete meanwhile, so the
// live trainers gave up on it at their reducer timeout (6 s here) and kept their own values for its whole
// share (bench/lab/README.md, "Where churn's cost lies").
TEST_CASE("AuxPeer: a trainer that dies in its round does not hold the aux peer's share", "[net][avg][aux]") {
  Logger& quiet = test::quiet_log();
  auto swarm = test::quiet_swarm(4);
  zmq::context_t context;
  const avg::VectorSchema schema{Bytes(wire::kSchemaHashBytes, 0x4b), 40000};
  REQUIRE(avg::publish_schema(swarm->node(0), "deadly", schema, 10min, Deadline::after(5s)).is_ok());

  auto aux_identity = crypto::Identity::generate();
  auto options = aux_options("deadly", quiet);
  options.averager.target_group_size = 4;
  collab::AuxPeer aux(context, swarm->node(3), aux_identity, options);
  REQUIRE(aux.start().is_ok());
  std::atomic<bool> stop{false};
  auto running = std::async(std::launch::async, [&] { return aux.run([&] { return stop.load(); }); });

  avg::AveragerOptions trainer_options = options.averager;
  trainer_options.role = avg::AvgRole::kNode;
  trainer_options.all_reduce.sender_timeout = 3s;
  trainer_options.all_reduce.reducer_timeout = 6s;
  trainer_options.all_reduce.liveness_timeout = 2s;
  std::vector<crypto::Identity> identities;
  std::vector<std::unique_ptr<avg::Averager>> live;
  for (size_t i = 0; i < 2; ++i) {
    identities.push_back(crypto::Identity::generate());
    live.push_back(std::make_unique<avg::Averager>(context, swarm->node(i), identities.back(), trainer_options));
    REQUIRE(live.back()->start().is_ok());
  }
  const std::vector<double> weights{1, 3};
  auto f = [](size_t k) { return static_cast<float>(k % 37) - 11.0f; };
  bool checked = false;
  const Deadline give_up = Deadline::after(60s);
  while (!checked && !give_up.passed()) {
    // The victim finds the round's group ahead, then dies before it sends anything: its port refuses.
    auto victim_identity = crypto::Identity::generate();
    auto victim = std::make_unique<avg::Averager>(context, swarm->node(2), victim_identity, trainer_options);
    REQUIRE(victim->start().is_ok());
    victim->prepare(schema, 0, "grad");
    std::vector<std::vector<float>> vectors(2, std::vector<float>(schema.length));
    for (size_t i = 0; i < 2; ++i) {
      for (size_t k = 0; k < schema.length; ++k) vectors[i][k] = static_cast<float>(i + 1) * f(k);
    }
    std::vector<std::future<Result<avg::StepOutcome>>> steps;
    for (size_t i = 0; i < 2; ++i) {
      steps.push_back(std::async(std::launch::async, [&, i] { return live[i]->step(schema, vectors[i], weights[i]); }));
    }
    const Deadline found = Deadline::after(10s);
    while (victim->ahead_search() == avg::Averager::AheadSearch::kSearching && !found.passed()) {
      std::this_thread::sleep_for(10ms);
    }
    const bool victim_in = victim->ahead_search() == avg::Averager::AheadSearch::kFound;
    victim.reset();
    std::vector<Result<avg::StepOutcome>> outcomes;
    for (auto& step : steps) outcomes.push_back(step.get());
    for (auto& outcome : outcomes) REQUIRE(outcome.is_ok());
    // A round without the aux peer or the victim in it (the aux peer's loop was between two searches):
    // again.
    if (!victim_in || outcomes[0]->group_size != 4 || outcomes[1]->group_size != 4) continue;
    checked = true;
    const auto group = live[0]->last_group();
    REQUIRE(group.has_value());
    const auto victim_index = group->index_of(victim_identity.peer_id());
    REQUIRE(victim_index.has_value());
    const std::uint64_t victim_share = group->begin().counts[*victim_index];
    for (size_t i = 0; i < 2; ++i) {
      INFO("live trainer " << i);
      // Only the victim's share stayed unaveraged: ours came back holding the live trainers' weighted mean,
      // (1·1 + 3·2) / 4 = 1.75 times f, the aux peer's too.
      std::vector<bool> kept(schema.length, false);  // our own values stay where nothing came back
      std::uint64_t unaveraged = 0;
      for (const auto& [begin, end] : outcomes[i]->all_reduce.unaveraged) {
        unaveraged += end - begin;
        for (auto k = begin; k < end; ++k) kept[k] = true;
      }
      CHECK(unaveraged == victim_share);
      size_t wrong = 0;
      for (size_t k = 0; k < schema.length; ++k) {
        const float expected = kept[k] ? static_cast<float>(i + 1) * f(k) : 1.75f * f(k);
        wrong += std::abs(vectors[i][k] - expected) > 1e-4f;
      }
      CHECK(wrong == 0);
    }
  }
  REQUIRE(checked);
  stop = true;
  REQUIRE(running.wait_for(20s) == std::future_status::ready);
  REQUIRE(running.get().is_ok());
}
