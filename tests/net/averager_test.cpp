// The averager as a trainer and an aux peer use it: DHT matchmaking, then the all-reduce, on loopback.
#include <catch2/catch.hpp>

#include <future>

#include "dedloc/avg/averager.hpp"
#include "dedloc/dht/local_swarm.hpp"
#include "support/quiet_swarm.hpp"

using namespace dedloc;
using namespace dedloc::avg;
using namespace std::chrono_literals;

TEST_CASE("Averager: three nodes and an aux peer average one step through the DHT", "[net][avg]") {
  Logger& quiet = test::quiet_log();
  auto swarm = test::quiet_swarm(4);
  zmq::context_t context;

  const VectorSchema schema{Bytes(wire::kSchemaHashBytes, 0x5c), 250001};
  std::vector<crypto::Identity> identities;
  std::vector<std::unique_ptr<Averager>> averagers;
  for (size_t i = 0; i < 4; ++i) {
    AveragerOptions options;
    options.run_id = "run7";
    options.role = i == 3 ? AvgRole::kAux : AvgRole::kNode;
    options.listen = "tcp://127.0.0.1:0";
    options.target_group_size = 4;
    options.matchmaking_time = 3s;
    options.part_elements = 10000;
    options.log = &quiet;
    identities.push_back(crypto::Identity::generate());
    averagers.push_back(std::make_unique<Averager>(context, swarm->node(i), identities.back(), options));
    REQUIRE(averagers.back()->start().is_ok());
  }
  // A node publishes the layout; the aux peer, which has no model, reads it.
  REQUIRE(publish_schema(swarm->node(0), "run7", schema, 10min, Deadline::after(5s)).is_ok());
  auto learned = read_schema(swarm->node(3), "run7", Deadline::after(5s));
  REQUIRE(learned.is_ok());
  REQUIRE(learned->has_value());
  CHECK((*learned)->hash == schema.hash);
  CHECK((*learned)->length == schema.length);

  std::vector<std::vector<float>> vectors(3, std::vector<float>(schema.length));
  const std::vector<double> weights{10, 20, 70};
  for (size_t i = 0; i < 3; ++i) {
    for (size_t k = 0; k < schema.length; ++k) vectors[i][k] = static_cast<float>((i + 1) * (k % 97)) - 40.0f;
  }
  std::vector<std::future<Result<StepOutcome>>> steps;
  for (size_t i = 0; i < 3; ++i) {
    steps.push_back(std::async(std::launch::async, [&, i] { return averagers[i]->step(schema, vectors[i], weights[i]); }));
  }
  steps.push_back(std::async(std::launch::async, [&] { return averagers[3]->step(**learned, {}, 0); }));
  for (size_t i = 0; i < 4; ++i) {
    auto outcome = steps[i].get();
    INFO("peer " << i);
    REQUIRE(outcome.is_ok());
    CHECK(outcome->group_size == 4);
    CHECK(outcome->all_reduce.averaged_fraction == 1.0);
  }
  // sum w_i (i+1) / sum w_i = (10 + 40 + 210) / 100 = 2.6
  for (size_t i = 0; i < 3; ++i) {
    double worst = 0;
    for (size_t k = 0; k < schema.length; ++k) {
      worst = std::max(worst, std::abs(vectors[i][k] - (2.6 * static_cast<double>(k % 97) - 40.0)));
    }
    CHECK(worst < 1e-4);
  }
}

TEST_CASE("Averager: alone, a step leaves the vector as it is and says why", "[net][avg]") {
  Logger& quiet = test::quiet_log();
  auto swarm = test::quiet_swarm(2);
  zmq::context_t context;
  AveragerOptions options;
  options.run_id = "lonely";
  options.listen = "tcp://127.0.0.1:0";
  options.matchmaking_time = 500ms;
  options.log = &quiet;
  auto identity = crypto::Identity::generate();
  Averager averager(context, swarm->node(0), identity, options);
  REQUIRE(averager.start().is_ok());
  std::vector<float> vector(100, 1.5f);
  auto outcome = averager.step(VectorSchema{Bytes(wire::kSchemaHashBytes, 1), 100}, vector, 1);
  REQUIRE(outcome.is_ok());
  CHECK(outcome->group_size == 0);
  CHECK_THAT(outcome->why_alone, Catch::Contains("no group"));
  CHECK(vector == std::vector<float>(100, 1.5f));
}
