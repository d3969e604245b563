// dedloc-train's errors as a volunteer meets them: each one exits non-zero with one line that names what
// is wrong (unreachable initial peer, another model in the run, corrupt checkpoint, bad recipe, a libtorch
// error while training).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "support/process.hpp"
#include "support/test_paths.hpp"
#include "support/trainer_process.hpp"

using namespace std::chrono_literals;

namespace {

// A valid ed25519 public key (the curve's base point) for addresses where nobody listens.
const std::string kSomeKey = "5866666666666666666666666666666666666666666666666666666666666666";

dedloc::test::CommandOutput run_train(const std::string& args) {
  return dedloc::test::run_command(dedloc::test::binary_path("tools/dedloc-train/dedloc-train") +
                                   " --listen tcp://127.0.0.1:0 --avg-listen tcp://127.0.0.1:0 " + args);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// recipes/mlp.yaml with `from` replaced by `to`.
std::string mlp_recipe_with(const std::string& dir, const std::string& from, const std::string& to) {
  return dedloc::test::write_recipe_variant("recipes/mlp.yaml", dir, "recipe.yaml", {{from, to}});
}

}  // namespace

TEST_CASE("dedloc-train: an unreachable initial peer is reported with the address and what to check",
          "[proc][train][cli]") {
  auto run = run_train("--recipe " + dedloc::test::source_path("recipes/mlp.yaml") +
                       " --initial-peers tcp://127.0.0.1:1/k/" + kSomeKey);
  INFO(run.output);
  CHECK(run.exit_code != 0);
  CHECK_THAT(run.output, Catch::Contains("none of the initial peers answered"));
  CHECK_THAT(run.output, Catch::Contains("tcp://127.0.0.1:1"));
}

TEST_CASE("dedloc-train: an initial peer without a key is refused unless the run is plaintext", "[proc][train][cli]") {
  // The transport is encrypted by default, so a keyless address could only be dialled in plaintext, and a
  // peer there would not answer: say so at once instead of timing out.
  auto run = run_train("--recipe " + dedloc::test::source_path("recipes/mlp.yaml") +
                       " --initial-peers tcp://127.0.0.1:1/p/" + std::string(40, 'a'));
  INFO(run.output);
  CHECK(run.exit_code == 2);
  CHECK_THAT(run.output, Catch::Contains("--initial-peers tcp://127.0.0.1:1/p/"));
  CHECK_THAT(run.output, Catch::Contains("no key (/k/KEY)"));
  CHECK_THAT(run.output, Catch::Contains("--plaintext"));
  // With --plaintext the same address is dialled (and, nobody being there, reported as unreachable).
  auto plaintext = run_train("--plaintext --recipe " + dedloc::test::source_path("recipes/mlp.yaml") +
                             " --initial-peers tcp://127.0.0.1:1/p/" + std::string(40, 'a'));
  INFO(plaintext.output);
  CHECK_THAT(plaintext.output, Catch::Contains("none of the initial peers answered"));
}

TEST_CASE("dedloc-train: a peer whose recipe builds another model is refused by the run, naming both schemas",
          "[proc][train][cli]") {
  const std::string dir = dedloc::test::make_temp_dir("dedloc-train-cli");
  auto first = dedloc::test::TrainerProcess::start(
      "first", {.recipe = "recipes/mlp.yaml", .run_id = "schema-check", .min_peers = 2});
  REQUIRE(first.has_value());
  auto run = run_train("--recipe " + mlp_recipe_with(dir, "hidden: 64", "hidden: 48") +
                       " --run-id schema-check --initial-peers " + first->address());
  INFO(run.output);
  CHECK(run.exit_code != 0);
  CHECK_THAT(run.output, Catch::Contains("run 'schema-check' trains another model"));
  CHECK_THAT(run.output, Catch::Contains("use the run's recipe or another --run-id"));
}

TEST_CASE("dedloc-train: --resume from a corrupt checkpoint names the file and starts nothing", "[proc][train][cli]") {
  const std::string dir = dedloc::test::make_temp_dir("dedloc-train-cli");
  const std::string recipe = dedloc::test::source_path("recipes/mlp.yaml");
  // A real checkpoint, then one byte of its tensor data flipped.
  auto made = run_train("--recipe " + recipe + " --max-epochs 3 --checkpoint-dir " + dir);
  INFO(made.output);
  REQUIRE(made.exit_code == 0);
  const std::string path = dir + "/checkpoint.safetensors";
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(-5, std::ios::end);
    char byte = 0;
    file.read(&byte, 1);
    file.seekp(-5, std::ios::end);
    byte = static_cast<char>(byte ^ 0x40);
    file.write(&byte, 1);
  }
  auto run = run_train("--recipe " + recipe + " --resume --checkpoint-dir " + dir);
  INFO(run.output);
  CHECK(run.exit_code != 0);
  CHECK_THAT(run.output, Catch::Contains(path));
  CHECK_THAT(run.output, Catch::Contains("corrupt"));
  CHECK_THAT(run.output, !Catch::Contains("\"ready\":true"));

  // And a checkpoint that is not there at all.
  std::filesystem::remove(path);
  auto missing = run_train("--recipe " + recipe + " --resume --checkpoint-dir " + dir);
  INFO(missing.output);
  CHECK(missing.exit_code != 0);
  CHECK_THAT(missing.output, Catch::Contains(path));
}

TEST_CASE("dedloc-train: a mistyped recipe key is an error naming the key and the file", "[proc][train][cli]") {
  const std::string dir = dedloc::test::make_temp_dir("dedloc-train-cli");
  const std::string recipe = mlp_recipe_with(dir, "micro_batch_size:", "micro_batchsize:");
  auto run = run_train("--recipe " + recipe);
  INFO(run.output);
  CHECK(run.exit_code != 0);
  CHECK_THAT(run.output, Catch::Contains("micro_batchsize"));
  CHECK_THAT(run.output, Catch::Contains(recipe));
}

TEST_CASE("dedloc-train: a centered clip without a usable radius names the key and the file", "[proc][train][cli]") {
  const std::string dir = dedloc::test::make_temp_dir("dedloc-train-cli");
  for (const std::string clip : {"centered_clip: {iterations: 5}", "centered_clip: {tau: -1}"}) {
    const std::string recipe = mlp_recipe_with(dir, "codec: none", "codec: none\n  " + clip);
    auto run = run_train("--recipe " + recipe);
    INFO(run.output);
    CHECK(run.exit_code != 0);
    CHECK_THAT(run.output, Catch::Contains("averaging.centered_clip"));
    CHECK_THAT(run.output, Catch::Contains("tau"));
    CHECK_THAT(run.output, Catch::Contains(recipe));
  }
}

TEST_CASE("dedloc-train: a match_ahead that is not true or false names the key and the file", "[proc][train][cli]") {
  const std::string dir = dedloc::test::make_temp_dir("dedloc-train-cli");
  const std::string recipe = mlp_recipe_with(dir, "codec: none", "codec: none\n  match_ahead: sometimes");
  auto run = run_train("--recipe " + recipe);
  INFO(run.output);
  CHECK(run.exit_code != 0);
  CHECK_THAT(run.output, Catch::Contains("match_ahead"));
  CHECK_THAT(run.output, Catch::Contains(recipe));
}

TEST_CASE("dedloc-train: averaging.shares other than planned or equal names the key and the file", "[proc][train][cli]") {
  const std::string dir = dedloc::test::make_temp_dir("dedloc-train-cli");
  const std::string recipe = mlp_recipe_with(dir, "codec: none", "codec: none\n  shares: uniform");
  auto run = run_train("--recipe " + recipe);
  INFO(run.output);
  CHECK(run.exit_code != 0);
  CHECK_THAT(run.output, Catch::Contains("averaging"));
  CHECK_THAT(run.output, Catch::Contains("shares: 'uniform' is not planned or equal"));
  CHECK_THAT(run.output, Catch::Contains(recipe));
}

TEST_CASE("dedloc-train: a bad key in any recipe section fails before the swarm is contacted", "[proc][train][cli]") {
  // The model section is the task's: it used to be checked only once the DHT had joined. With an initial
  // peer nobody answers at, the recipe error must still be what is reported, and at once (joining would
  // take its 15 s deadline first).
  const std::string dir = dedloc::test::make_temp_dir("dedloc-train-cli");
  const std::string recipe = mlp_recipe_with(dir, "hidden: 64", "hiden: 64");
  const auto begin = std::chrono::steady_clock::now();
  auto run = run_train("--recipe " + recipe + " --initial-peers tcp://127.0.0.1:1/k/" + kSomeKey);
  const auto took = std::chrono::steady_clock::now() - begin;
  INFO(run.output);
  CHECK(run.exit_code == 3);  // a config error (docs/operators.md)
  CHECK_THAT(run.output, Catch::Contains("hiden"));
  CHECK_THAT(run.output, Catch::Contains(recipe));
  CHECK_THAT(run.output, !Catch::Contains("initial peers"));
  CHECK(took < 10s);
}

TEST_CASE("dedloc-train: --help offers only the flags it honours", "[proc][train][cli]") {
  auto help = run_train("--help");
  INFO(help.output);
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.output, Catch::Contains("--recipe"));
  CHECK_THAT(help.output, !Catch::Contains("--config"));
  CHECK_THAT(help.output, !Catch::Contains("--print-config"));
  auto refused = run_train("--recipe " + dedloc::test::source_path("recipes/mlp.yaml") + " --config some.yaml");
  INFO(refused.output);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output, Catch::Contains("--config"));
}

TEST_CASE("dedloc-train: a libtorch error while training ends it with one error line, exit 1 and its records withdrawn",
          "[proc][train][cli][torch_error]") {
  // The test-only task (models/failing_task.hpp, enabled by DEDLOC_TEST_TASKS=1) throws what libtorch
  // throws when a device runs out of memory, after 40 micro-batches: 5 global steps of recipes/mlp.yaml.
  auto [bootstrap, ready] = dedloc::test::start_ready({dedloc::test::binary_path("tools/dedloc-dht/dedloc-dht"),
                                                       "--log-level", "warning", "serve", "--listen", "tcp://127.0.0.1:0"});
  const std::string address = ready["endpoints"][0].get<std::string>();
  const std::string dir = dedloc::test::make_temp_dir("dedloc-train-cli");
  for (const std::string error : {"out_of_memory", "libtorch", "std"}) {
    const std::string run_id = "failing-" + error;
    const std::string recipe = dedloc::test::write_recipe_variant(
        "recipes/mlp.yaml", dir, "failing-" + error + ".yaml",
        {{"  kind: mlp\n", "  kind: test-failing-mlp\n  fail_after: 40\n  error: " + error + "\n"}});
    const std::string stdout_path = dir + "/stdout-" + error;
    // stderr alone in the output: every line the operator sees there.
    auto run = dedloc::test::run_command(
        "(DEDLOC_TEST_TASKS=1 " + dedloc::test::binary_path("tools/dedloc-train/dedloc-train") +
        " --listen tcp://127.0.0.1:0 --avg-listen tcp://127.0.0.1:0 --log-level warning --json --recipe " + recipe +
        " --run-id " + run_id + " --initial-peers " + address + " 2>&1 >" + stdout_path + ")");
    INFO(error << ": " << run.output);
    CHECK(run.exit_code == 1);
    auto lines = lines_of(run.output);
    size_t error_lines = 0;
    for (const auto& line : lines) error_lines += line.find("error") != std::string::npos ? 1 : 0;
    CHECK(error_lines == 1);
    CHECK_THAT(run.output, Catch::Contains("dedloc-train: error: "));
    CHECK_THAT(run.output, !Catch::Contains("terminate"));
    if (error == "out_of_memory") {
      CHECK_THAT(run.output, Catch::Contains("out of memory on the device while computing a micro-batch"));
      CHECK_THAT(run.output, Catch::Contains("CUDA out of memory"));
    } else if (error == "libtorch") {
      CHECK_THAT(run.output, Catch::Contains("libtorch failed while computing a micro-batch"));
    } else {
      CHECK_THAT(run.output, Catch::Contains("computing a micro-batch failed: test-failing-mlp threw"));
    }
    // It trained before it failed: steps on stdout, so its progress record was in the DHT.
    const std::string out = read_file(stdout_path);
    INFO(out);
    CHECK_THAT(out, Catch::Contains("\"event\":\"alone\""));
    CHECK_THAT(out, !Catch::Contains("\"event\":\"exit\""));

    // ... and now its progress and metrics records are withdrawn: the bootstrap node holds an empty value
    // under the peer's subkey (dedloc-dht shows a value that is not msgpack as hex).
    for (const std::string family : {"_progress", "_metrics"}) {
      auto got = dedloc::test::run_command(dedloc::test::binary_path("tools/dedloc-dht/dedloc-dht") +
                                           " --log-level warning get " + run_id + family +
                                           " --latest --json --initial-peers " + address + " 2>&1");
      INFO(family << ": " << got.output);
      REQUIRE(got.exit_code == 0);
      auto record = nlohmann::json::parse(got.output);
      REQUIRE(record["found"] == true);
      REQUIRE(record["subkeys"].size() == 1);
      for (const auto& [subkey, entry] : record["subkeys"].items()) CHECK(entry["value"] == nlohmann::json{{"hex", ""}});
    }
  }
}
