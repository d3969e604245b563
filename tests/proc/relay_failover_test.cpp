// Relay failover with real processes on loopback: a client-mode dedloc-train attached to one of two
// dedloc-relay processes notices when that relay is SIGKILLed, attaches to the other (found in the DHT) and
// advertises itself there: with the public trainer gone too, `dedloc-avg export` downloads the state from
// the client peer through the second relay.
#include <catch2/catch.hpp>

#include <csignal>

#include "support/process.hpp"
#include "support/test_paths.hpp"
#include "support/trainer_process.hpp"

using namespace std::chrono_literals;
using dedloc::test::TrainerArgs;
using dedloc::test::TrainerProcess;

namespace {

std::pair<dedloc::test::ChildProcess, std::string> start_relay(const std::string& bootstrap) {
  auto [relay, ready] = dedloc::test::start_ready({dedloc::test::binary_path("tools/dedloc-relay/dedloc-relay"),
                                                   "--log-level", "warning", "serve", "--listen", "tcp://127.0.0.1:0",
                                                   "--initial-peers", bootstrap});
  return {std::move(relay), ready["endpoints"][0].get<std::string>()};
}

// "tcp://127.0.0.1:PORT/k/KEY" -> "relay://127.0.0.1:PORT/k/KEY/p/": how peers behind that relay are addressed.
std::string relay_prefix(const std::string& relay) { return "relay://" + relay.substr(std::string("tcp://").size()) + "/p/"; }

}  // namespace

TEST_CASE("A client-mode trainer whose relay is SIGKILLed moves to another relay and is served there",
          "[proc][relay]") {
  auto [dht, dht_ready] = dedloc::test::start_ready({dedloc::test::binary_path("tools/dedloc-dht/dedloc-dht"),
                                                     "--log-level", "warning", "serve", "--listen", "tcp://127.0.0.1:0"});
  const auto bootstrap = dht_ready["endpoints"][0].get<std::string>();
  auto [first, first_address] = start_relay(bootstrap);
  auto [second, second_address] = start_relay(bootstrap);

  TrainerArgs args{.recipe = "recipes/mlp.yaml", .initial_peer = bootstrap, .run_id = "failover", .max_time = 120,
                   .min_peers = 2};
  auto a = TrainerProcess::start("public", args);
  args.data_seed = 2;
  args.extra = {"--client-mode", "--relay", first_address};
  auto b = TrainerProcess::start("client", args);
  REQUIRE((a && b));
  REQUIRE(dedloc::test::pump_until({&*a, &*b}, 60s, [&] { return a->averaged_rounds() >= 3 && b->averaged_rounds() >= 3; }));

  first.kill(SIGKILL);
  REQUIRE(first.wait(10s) == 128 + SIGKILL);
  // The link declares the relay dead after 6 s of silence; the keeper attaches elsewhere at once.
  dedloc::test::pump_until({&*a, &*b}, 10s, [] { return false; });
  a->process().kill(SIGKILL);
  REQUIRE(a->process().wait(10s) == 128 + SIGKILL);

  auto exported = dedloc::test::run_command(
      dedloc::test::binary_path("tools/dedloc-avg/dedloc-avg") + " --log-level warning export --run failover "
      "--initial-peers " + bootstrap + " --out " + dedloc::test::make_temp_dir("dedloc-failover") +
      " --request-timeout 2 --timeout 60");
  INFO(exported.output);
  CHECK(exported.exit_code == 0);
  CHECK(exported.output.find("(from " + relay_prefix(second_address) + b->peer_id()) != std::string::npos);
  b->pump(10ms);
}

TEST_CASE("An aux peer in client mode reduces for a run through a relay", "[proc][relay]") {
  auto [dht, dht_ready] = dedloc::test::start_ready({dedloc::test::binary_path("tools/dedloc-dht/dedloc-dht"),
                                                     "--log-level", "warning", "serve", "--listen", "tcp://127.0.0.1:0"});
  const auto bootstrap = dht_ready["endpoints"][0].get<std::string>();
  auto [relay, relay_address] = start_relay(bootstrap);
  auto [aux, aux_ready] = dedloc::test::start_ready({dedloc::test::binary_path("tools/dedloc-avg/dedloc-avg"),
                                                     "--log-level", "warning", "aux", "--run", "auxrelay",
                                                     "--initial-peers", bootstrap, "--client-mode",
                                                     "--matchmaking-time", "1"});
  CHECK(aux_ready["endpoints"][0].get<std::string>().rfind(relay_prefix(relay_address), 0) == 0);

  TrainerArgs args{.recipe = "recipes/mlp.yaml", .initial_peer = bootstrap, .run_id = "auxrelay", .max_time = 90,
                   .min_peers = 2};
  auto a = TrainerProcess::start("a", args);
  args.data_seed = 2;
  auto b = TrainerProcess::start("b", args);
  REQUIRE((a && b));
  // Groups of three: both trainers and the aux peer, whose share of every vector went through the relay.
  auto with_aux = [](const TrainerProcess& t) {
    size_t n = 0;
    for (const auto& step : t.steps()) n += step["event"] == "averaged" && step.value("group_size", size_t{0}) >= 3;
    return n;
  };
  CHECK(dedloc::test::pump_until({&*a, &*b}, 60s, [&] { return with_aux(*a) >= 3 && with_aux(*b) >= 3; }));
}
