// A whole collaboration in the lab (dedloc-lab run): public peers and volunteers behind NAT through a
// relay, 300 ms apart on 100 Mbit/s links (matchmaking and RPC deadlines must hold on the longest paths), running the real dedloc-dht, dedloc-relay and dedloc-train
// (synthetic task). Needs root and /dev/net/tun; otherwise SKIPPED with the reason (exit 77).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "dedloc/lab/lab_network.hpp"
#include "support/process.hpp"
#include "support/skip.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;

TEST_CASE("Lab scenario: peers behind NAT train with public peers through a relay, 300 ms apart", "[proc][lab]") {
  if (auto probe = lab::LabNetwork::create(1); !probe) {
    test::skip_test("the lab cannot run here: " + probe.status().to_string());
  }
  auto run = test::run_command("'" + test::binary_path("tools/dedloc-lab/dedloc-lab") + "' run '" +
                               test::source_path("bench/lab/scenarios/long-paths.yaml") + "' --duration 45s --json 2>&1");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const std::string last = run.output.substr(run.output.rfind("\n{") + 1);
  const auto report = nlohmann::json::parse(last);
  CHECK(report["global_steps"].get<int>() >= 1);
  CHECK(report["averaged_fraction"].get<double>() > 0.5);
  CHECK(report["samples_per_s"].get<double>() > 0);
  // The volunteers behind NAT took part: they sent gradients, through the relay.
  CHECK(report["groups"]["home"]["bytes_sent_per_step"].get<double>() > 0);
  CHECK(report["predicted_steps_per_s"].get<double>() > 0);
}
