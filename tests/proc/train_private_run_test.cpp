// A private run with the trainer: a private run's members (a dedloc-dht bootstrap and two dedloc-train peers, each
// with a token of the run's authority) train together, every message sealed and checked; a trainer without
// a token cannot join and says why.
#include <catch2/catch.hpp>

#include "support/private_run.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"
#include "support/trainer_process.hpp"

using namespace dedloc;
using namespace std::chrono_literals;

TEST_CASE("A private run's trainers average together, and a trainer without a token is refused",
          "[proc][train][access]") {
  test::PrivateRun run;
  std::vector<std::string> boot_argv{test::binary_path("tools/dedloc-dht/dedloc-dht"), "--log-level", "warning"};
  for (auto& flag : run.member("boot")) boot_argv.push_back(flag);
  boot_argv.insert(boot_argv.end(), {"serve", "--listen", "tcp://127.0.0.1:0"});
  auto [boot, ready] = test::start_ready(boot_argv);
  const std::string address = ready["endpoints"][0].get<std::string>();

  auto start = [&](const std::string& name, std::uint64_t seed) {
    test::TrainerArgs args{.recipe = "recipes/mlp.yaml", .initial_peer = address, .run_id = "private",
                           .data_seed = seed, .max_epochs = 5, .min_peers = 2, .extra = run.member(name)};
    auto trainer = test::TrainerProcess::start(name, args);
    REQUIRE(trainer.has_value());
    return std::move(*trainer);
  };
  auto a = start("a", 1);
  auto b = start("b", 2);
  REQUIRE(test::pump_until({&a, &b}, 120s, [&] { return a.find("exit") && b.find("exit"); }));
  for (auto* t : {&a, &b}) {
    INFO("trainer " << t->name());
    CHECK(t->process().wait(10s) == 0);
    CHECK(t->averaged_rounds() >= 3);  // sealed gradients went both ways
    CHECK((*t->find("exit"))["epoch"].get<std::uint64_t>() == 5);
  }

  auto outsider = test::run_command(test::binary_path("tools/dedloc-train/dedloc-train") +
                                    " --recipe " + test::source_path("recipes/mlp.yaml") +
                                    " --listen tcp://127.0.0.1:0 --avg-listen tcp://127.0.0.1:0 --run-id private"
                                    " --max-epochs 1 --initial-peers " + address);
  INFO(outsider.output);
  CHECK(outsider.exit_code != 0);
  CHECK_THAT(outsider.output, Catch::Contains("this run is private"));
}
