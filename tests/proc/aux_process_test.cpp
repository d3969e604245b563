// `dedloc-avg aux` as a separate process: it learns the run's vector layout from the DHT, joins the
// trainers' group with the aux role and reduces a share; its results are checked at the trainers.
#include <catch2/catch.hpp>

#include <csignal>
#include <future>

#include <nlohmann/json.hpp>

#include "dedloc/avg/averager.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;
using namespace dedloc::avg;
using namespace std::chrono_literals;

namespace {


}  // namespace

TEST_CASE("dedloc-avg aux reduces a share of two trainers' vectors, then leaves on SIGTERM", "[proc][avg]") {
  auto [dht_process, dht_ready] = test::start_ready({test::binary_path("tools/dedloc-dht/dedloc-dht"), "serve", "--listen",
                                         "tcp://127.0.0.1:0", "--log-level", "warning"});
  const std::string bootstrap = dht_ready["endpoints"][0];
  auto [aux, aux_ready] = test::start_ready({test::binary_path("tools/dedloc-avg/dedloc-avg"), "--log-level", "warning", "aux",
                                 "--run", "procrun", "--initial-peers", bootstrap, "--listen", "tcp://127.0.0.1:0",
                                 "--target-group-size", "3", "--matchmaking-time", "3", "--bandwidth", "1000"});
  CHECK(aux_ready["role"] == "aux");

  // Two trainers in this process, each with its own DHT node.
  static Logger quiet(LogLevel::kError);
  zmq::context_t context;
  std::vector<crypto::Identity> identities{crypto::Identity::generate(), crypto::Identity::generate()};
  std::vector<std::unique_ptr<dht::Node>> nodes;
  std::vector<std::unique_ptr<Averager>> trainers;
  for (size_t i = 0; i < 2; ++i) {
    dht::NodeOptions dht_options;
    dht_options.maintenance_interval = Duration::zero();
    dht_options.log = &quiet;
    nodes.push_back(std::make_unique<dht::Node>(context, identities[i], dht_options));
    REQUIRE(nodes.back()->start().is_ok());
    auto address = net::PeerAddress::parse(bootstrap);
    REQUIRE(address.is_ok());
    REQUIRE(nodes.back()->bootstrap({*address}, Deadline::after(10s)).is_ok());
    AveragerOptions options;
    options.run_id = "procrun";
    options.listen = "tcp://127.0.0.1:0";
    options.target_group_size = 3;
    options.matchmaking_time = 3s;
    options.part_elements = 4096;
    options.log = &quiet;
    trainers.push_back(std::make_unique<Averager>(context, *nodes.back(), identities[i], options));
    REQUIRE(trainers.back()->start().is_ok());
  }
  const VectorSchema schema{Bytes(wire::kSchemaHashBytes, 0x17), 100003};
  REQUIRE(publish_schema(*nodes[0], "procrun", schema, 10min, Deadline::after(5s)).is_ok());

  // The aux peer polls the layout once a second and then looks for a group: the trainers keep stepping
  // until a step finds a group (each step looks for 3 s), at most a few times.
  std::vector<std::vector<float>> vectors(2, std::vector<float>(schema.length));
  const std::vector<double> weights{1, 3};
  for (size_t i = 0; i < 2; ++i) {
    for (size_t k = 0; k < schema.length; ++k) vectors[i][k] = static_cast<float>(i == 0 ? k % 13 : 100 + k % 13);
  }
  size_t group_size = 0;
  for (int attempt = 0; attempt < 4 && group_size == 0; ++attempt) {
    std::vector<std::future<Result<StepOutcome>>> steps;
    for (size_t i = 0; i < 2; ++i) {
      steps.push_back(std::async(std::launch::async, [&, i] { return trainers[i]->step(schema, vectors[i], weights[i]); }));
    }
    std::vector<Result<StepOutcome>> outcomes;
    for (auto& s : steps) outcomes.push_back(s.get());
    for (auto& o : outcomes) REQUIRE(o.is_ok());
    group_size = outcomes[0]->group_size;
    if (group_size == 3) CHECK(outcomes[1]->group_size == 3);
  }
  REQUIRE(group_size == 3);  // both trainers and the aux peer
  // (1·k%13 + 3·(100 + k%13)) / 4 = k%13 + 75 for both trainers.
  for (size_t i = 0; i < 2; ++i) {
    double worst = 0;
    for (size_t k = 0; k < schema.length; ++k) {
      worst = std::max(worst, std::abs(vectors[i][k] - static_cast<double>(k % 13 + 75)));
    }
    CHECK(worst < 1e-4);
  }

  aux.kill(SIGTERM);
  CHECK(aux.wait(40s) == 0);  // leaves within its round's bounded wait
}
