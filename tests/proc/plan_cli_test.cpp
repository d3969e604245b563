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

namespace {

// Four GPU peers in client mode on 1 MB/s links and a CPU peer that reduces everything: each GPU peer moves
// a whole 2 MB gradient per step each way, so the links, not their 8000 samples/s, bound a synchronous run at
// B/2 = 2048 samples/s (mode_prediction_test.cpp has the arithmetic).
std::string link_bound_peers() {
  return write_file("link-bound.yaml", "batch: 4096\nparams: 1M\ncodec: fp16\npeers:\n"
                                       "  - {name: gpu, count: 4, compute: 2000, bandwidth: 1MB, client_mode: true}\n"
                                       "  - {name: cpu, bandwidth: 100MB}\n");
}

}  // namespace

TEST_CASE("dedloc-plan --compare-modes: DiLoCo's communication bound is H times the synchronous one",
          "[plan][cli][modes]") {
  const std::string peers = " --peers " + link_bound_peers();
  auto run = run_plan("--json --compare-modes --inner-steps 3" + peers);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  auto json = nlohmann::json::parse(run.output);
  const auto& sync = json["synchronous"];
  const auto& diloco = json["diloco"];
  CHECK(json["inner_steps"] == 3);
  CHECK(sync["bound"] == "communication");
  CHECK(diloco["bound"] == "communication");
  CHECK(sync["averaged_batch"] == 4096);
  CHECK(diloco["averaged_batch"] == 3 * 4096);
  CHECK(sync["samples_per_second"].get<double>() == Approx(2048));
  CHECK(diloco["samples_per_second"].get<double>() == Approx(3 * 2048));
  CHECK(diloco["steps_per_second"].get<double>() == Approx(sync["steps_per_second"].get<double>()));
  CHECK(diloco["upload_bytes_per_sample"].get<double>() == Approx(sync["upload_bytes_per_sample"].get<double>() / 3));
  CHECK(diloco["peers"][0]["name"] == "gpu-1");
  CHECK(diloco["peers"][0]["upload_bytes_per_sample"].get<double>() == Approx(2e6 / (3 * 4096)));
  CHECK(json["diloco_samples_speedup"].get<double>() == Approx(3));

  // Eight inner steps: the links would allow 8 x 2048 samples/s, the GPUs compute 8000.
  auto text = run_plan("--compare-modes --inner-steps 8" + peers);
  INFO(text.output);
  REQUIRE(text.exit_code == 0);
  CHECK_THAT(text.output, Catch::Contains("DiLoCo with 8 inner steps per outer step"));
  CHECK_THAT(text.output, Catch::Contains("communication: upload of 'gpu-1'"));
  CHECK_THAT(text.output, Catch::Contains("diloco, H=8") && Catch::Contains("32768 (outer)"));
  CHECK_THAT(text.output, Catch::Contains("diloco over synchronous: 3.91x samples/s, 8x fewer bytes per sample"));
}

TEST_CASE("dedloc-plan --mode diloco plans the outer batch, and without --mode the output is the plan alone",
          "[plan][cli][modes]") {
  const std::string peers = " --peers " + link_bound_peers();
  auto diloco = run_plan("--json --mode diloco --inner-steps 3" + peers);
  INFO(diloco.output);
  REQUIRE(diloco.exit_code == 0);
  auto json = nlohmann::json::parse(diloco.output);
  CHECK(json["mode"] == "diloco");
  CHECK(json["inner_steps"] == 3);
  CHECK(json["global_batch"] == 4096);
  CHECK(json["batch"] == 3 * 4096);
  CHECK(json["bound"] == "communication");
  CHECK(json["prediction"]["samples_per_second"].get<double>() == Approx(3 * 2048));
  CHECK(json["peers"][0]["upload_bytes_per_sample"].get<double>() == Approx(2e6 / (3 * 4096)));

  auto text = run_plan("--mode diloco --inner-steps 3" + peers);
  INFO(text.output);
  CHECK_THAT(text.output, Catch::StartsWith("mode: diloco, 3 inner steps per outer step") &&
                              Catch::Contains("predicted: ") && Catch::Contains("upload per sample: "));
  auto sync = run_plan("--mode synchronous" + peers);
  CHECK_THAT(sync.output, Catch::StartsWith("mode: synchronous, one all-reduce of the gradient per global batch of 4096"));

  auto plain = run_plan("--json" + peers);
  REQUIRE(plain.exit_code == 0);
  auto plain_json = nlohmann::json::parse(plain.output);
  CHECK_FALSE(plain_json.contains("mode"));
  CHECK(plain_json["batch"] == 4096);
  CHECK(plain_json["prediction"]["samples_per_second"].get<double>() == Approx(2048));
  CHECK_THAT(run_plan(peers).output, Catch::StartsWith("5 peers, batch 4096"));
}

TEST_CASE("dedloc-plan refuses a mode or inner step count it cannot use, naming the option", "[plan][cli][modes]") {
  const std::string peers = " --peers " + link_bound_peers();
  auto check_refused = [&](const std::string& args, const std::string& says) {
    auto run = run_plan(args + peers);
    INFO(args << "\n" << run.output);
    CHECK(run.exit_code == 2);
    CHECK_THAT(run.output, Catch::StartsWith("dedloc-plan: error:") && Catch::Contains(says));
    CHECK(std::count(run.output.begin(), run.output.end(), '\n') == 1);
  };
  check_refused("--mode diloco --inner-steps 0", "--inner-steps: '0' is not a number of inner steps");
  check_refused("--mode diloco --inner-steps -3", "--inner-steps: '-3'");
  check_refused("--compare-modes --inner-steps 2.5", "--inner-steps: '2.5'");
  check_refused("--mode diloco", "--mode diloco needs --inner-steps");
  check_refused("--compare-modes", "--compare-modes needs --inner-steps");
  check_refused("--mode fast --inner-steps 2", "--mode: unknown mode 'fast'");
  check_refused("--compare-modes --mode diloco --inner-steps 2", "leave out --mode");
  check_refused("--inner-steps 4", "--inner-steps is DiLoCo's");
  check_refused("--mode synchronous --inner-steps 4", "--inner-steps is DiLoCo's");

  auto help = run_plan("--help");
  CHECK_THAT(help.output, Catch::Contains("--mode") && Catch::Contains("--inner-steps") &&
                              Catch::Contains("--compare-modes"));
}
