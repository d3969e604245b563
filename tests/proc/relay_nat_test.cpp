// Relays behind real NAT (scripts/nat-topology): the public namespace runs the DHT bootstrap
// node, a dedloc-relay and a public trainer; each home, behind its own NAT router, runs a client-mode
// trainer that finds the relay in the DHT. They train together (the clients' gradients are averaged with
// the public peer's), and once the public trainer is SIGKILLed, the run's state is downloaded from a
// client-mode peer through the relay (`dedloc-avg export` in the public namespace). Skipped loudly where
// namespaces cannot be made.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <csignal>

#include "support/nat_topology.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"
#include "support/trainer_process.hpp"

using namespace std::chrono_literals;
using dedloc::test::TrainerArgs;
using dedloc::test::TrainerProcess;

namespace {

std::pair<dedloc::test::ChildProcess, nlohmann::json> start_in(const dedloc::test::NatTopology& net,
                                                               const std::string& ns, std::vector<std::string> argv) {
  auto command = net.launcher(ns);
  command.insert(command.end(), argv.begin(), argv.end());
  return dedloc::test::start_ready(command, 30s);
}

size_t averaged_with(const TrainerProcess& t, size_t group) {
  size_t n = 0;
  for (const auto& step : t.steps()) n += step["event"] == "averaged" && step.value("group_size", size_t{0}) >= group;
  return n;
}

}  // namespace

TEST_CASE("Client-mode trainers behind NAT train with a public one and serve their state through a relay",
          "[proc][nat][relay]") {
  dedloc::test::skip_unless_namespaces();
  dedloc::test::NatTopology net("drly" + std::to_string(::getpid()));
  const auto pub = net["PUB_NS"];
  const auto listen = "tcp://" + net["PUB_ADDR"] + ":0";

  auto [dht, dht_ready] = start_in(net, pub, {dedloc::test::binary_path("tools/dedloc-dht/dedloc-dht"), "--log-level",
                                              "warning", "serve", "--listen", listen});
  const auto bootstrap = dht_ready["endpoints"][0].get<std::string>();
  auto [relay, relay_ready] = start_in(net, pub, {dedloc::test::binary_path("tools/dedloc-relay/dedloc-relay"),
                                                  "--log-level", "warning", "serve", "--listen", listen,
                                                  "--initial-peers", bootstrap});
  const auto relay_address = relay_ready["endpoints"][0].get<std::string>();
  CHECK(relay_address.find(net["PUB_ADDR"]) != std::string::npos);

  TrainerArgs public_args{.recipe = "recipes/mlp.yaml", .initial_peer = bootstrap, .run_id = "nat", .data_seed = 1,
                          .max_time = 120, .min_peers = 3, .launcher = net.launcher(pub), .host = net["PUB_ADDR"]};
  auto a = TrainerProcess::start("public", public_args);
  REQUIRE(a.has_value());
  auto client_args = [&](const std::string& home, std::uint64_t seed) {
    return TrainerArgs{.recipe = "recipes/mlp.yaml", .initial_peer = bootstrap, .run_id = "nat", .data_seed = seed,
                       .max_time = 120, .min_peers = 3, .extra = {"--client-mode"},
                       .launcher = net.launcher(net[home + "_NS"]), .host = net[home + "_ADDR"]};
  };
  auto b = TrainerProcess::start("home1", client_args("HOME1", 2));
  auto c = TrainerProcess::start("home2", client_args("HOME2", 3));
  REQUIRE((b && c));

  // Averaging succeeds across the NAT: every peer takes steps averaged in a group of all three.
  REQUIRE(dedloc::test::pump_until({&*a, &*b, &*c}, 90s, [&] {
    return averaged_with(*a, 3) >= 5 && averaged_with(*b, 3) >= 5 && averaged_with(*c, 3) >= 5;
  }));

  // With the public trainer gone, the only donors are the clients, reachable only through the relay.
  a->process().kill(SIGKILL);
  REQUIRE(a->process().wait(10s) == 128 + SIGKILL);
  dedloc::test::pump_until({&*b, &*c}, 3s, [] { return false; });
  const std::string out = dedloc::test::make_temp_dir("dedloc-relay-export");
  auto launcher = net.launcher(pub);
  std::string command;
  for (const auto& word : launcher) command += "'" + word + "' ";
  command += dedloc::test::binary_path("tools/dedloc-avg/dedloc-avg") + " --log-level warning export --run nat "
             "--initial-peers " + bootstrap + " --out " + out + " --request-timeout 2 --timeout 60";
  auto exported = dedloc::test::run_command(command);
  INFO(exported.output);
  CHECK(exported.exit_code == 0);
  CHECK(exported.output.find("exported epoch ") != std::string::npos);
  CHECK(exported.output.find("(from relay://" + relay_address.substr(std::string("tcp://").size())) != std::string::npos);
  b->pump(10ms);
  c->pump(10ms);
}
