// dedloc-train's errors as a volunteer meets them: each one exits non-zero with one line that names what
// is wrong (unreachable initial peer, another model in the run, corrupt checkpoint, bad recipe).
#include <filesystem>
#include <fstream>

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
