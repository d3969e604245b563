// dedloc-plan as operators run it: the real binary on the shipped peer files and on broken ones.
#include <fstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace std::chrono_literals;

namespace {

dedloc::test::CommandOutput run_plan(const std::string& args) {
  return dedloc::test::run_command(dedloc::test::binary_path("tools/dedloc-plan/dedloc-plan") + " " + args, 30s);
}

std::string write_file(const std::string& name, const std::string& text) {
  std::string path = dedloc::test::make_temp_dir("dedloc-plan") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("dedloc-plan prints the plan next to the classic strategies", "[plan][cli]") {
  auto run = run_plan("--peers " + dedloc::test::source_path("configs/peers/gpu-plus-cpu.yaml"));
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK_THAT(run.output, Catch::Contains("method: exact"));
  CHECK_THAT(run.output, Catch::Contains("cpu-4") && Catch::Contains("aggregate"));
  CHECK_THAT(run.output, Catch::Contains("BytePS-like") && Catch::Contains("butterfly all-reduce"));
}

TEST_CASE("dedloc-plan --json is machine-readable and flags override the file", "[plan][cli]") {
  auto run = run_plan("--json --params 36M --codec uint8 --batch 8192 --peers " +
                      dedloc::test::source_path("configs/peers/swav-8-fast-16-slow.yaml"));
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  auto json = nlohmann::json::parse(run.output);
  CHECK(json["params"] == 36e6);
  CHECK(json["codec"] == "uint8");
  CHECK(json["batch"] == 8192);
  CHECK(json["method"] == "heuristic");
  CHECK(json["peers"].size() == 24);
}

TEST_CASE("dedloc-plan --codec takes the names recipes use, and the old blockwise-8bit with a warning", "[plan][cli]") {
  const std::string peers = " --peers " + dedloc::test::source_path("configs/peers/equal-peers.yaml");
  for (const char* name : {"none", "fp16", "scaled-fp16", "uint8", "blockwise8"}) {
    auto run = run_plan(std::string("--json --params 18M --codec ") + name + peers);
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK(nlohmann::json::parse(run.output)["codec"] == name);
  }
  auto old = run_plan("--params 18M --codec blockwise-8bit" + peers);
  INFO(old.output);
  CHECK(old.exit_code == 0);
  CHECK_THAT(old.output, Catch::Contains("W config: codec 'blockwise-8bit' is the old name of 'blockwise8'"));
  CHECK_THAT(old.output, Catch::Contains("(blockwise8)"));
  auto unknown = run_plan("--params 18M --codec blockwise-8" + peers);
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.output, Catch::StartsWith("dedloc-plan: error:") && Catch::Contains("--codec") &&
                                 Catch::Contains("blockwise8"));
}

TEST_CASE("dedloc-plan rejects bad input with one line naming the problem", "[plan][cli]") {
  auto typo = run_plan("--peers " + write_file("typo.yaml", "params: 18M\npeers:\n  - {name: a, compute: 1, bandwidth: 1Gbit, uplaod: 1}\n"));
  CHECK(typo.exit_code == 3);
  CHECK_THAT(typo.output, Catch::StartsWith("dedloc-plan: error:") && Catch::Contains("uplaod"));
  CHECK(std::count(typo.output.begin(), typo.output.end(), '\n') == 1);

  auto negative = run_plan("--peers " + write_file("neg.yaml", "params: 18M\npeers:\n  - {name: a, compute: 1, bandwidth: -1Gbit}\n"));
  CHECK(negative.exit_code != 0);
  CHECK_THAT(negative.output, Catch::Contains("bandwidth") && Catch::Contains(">= 0"));

  auto clients = run_plan("--peers " + write_file("clients.yaml",
                                                  "params: 18M\npeers:\n  - {name: a, compute: 1, bandwidth: 1Gbit, client_mode: true}\n"));
  CHECK(clients.exit_code != 0);
  CHECK_THAT(clients.output, Catch::Contains("no peer can aggregate"));

  auto infeasible = run_plan("--peers " + write_file("cut.yaml", "params: 18M\npeers:\n"
                                                                 "  - {name: gpu, compute: 10, bandwidth: 1Gbit, client_mode: true}\n"
                                                                 "  - {name: cpu, bandwidth: 1Gbit}\n"
                                                                 "limits:\n  - {from: gpu, to: cpu, rate: 0}\n"));
  CHECK(infeasible.exit_code == 1);
  CHECK_THAT(infeasible.output, Catch::Contains("infeasible"));

  auto live = run_plan("--live --initial-peers tcp://127.0.0.1:1 --run r");
  CHECK(live.exit_code != 0);
  CHECK_THAT(live.output, Catch::Contains("not available until the DHT exists"));

  auto missing = run_plan("");
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.output, Catch::Contains("--peers"));
}
