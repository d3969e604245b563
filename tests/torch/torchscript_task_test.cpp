// The TorchScript task (train/models/torchscript_task.hpp): a module written by PyTorch
// (tests/python/torchscript_modules.py, run with Debian's /usr/bin/python3) trains on tensor shards and
// exports itself back; each way a user's module can be wrong is one error line naming the file; and a
// peer whose module has other parameters than the run's is refused when it joins.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <torch/script.h>

#include "dedloc/core/run_command.hpp"
#include "dedloc/train/optimizer.hpp"
#include "dedloc/train/recipe.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"
#include "support/trainer_process.hpp"

using namespace dedloc;
using namespace dedloc::train;
using namespace std::chrono_literals;

namespace {

// The modules and shards, made once per test process.
const std::string& modules_dir() {
  static const std::string dir = [] {
    std::string out = test::make_temp_dir("dedloc-torchscript");
    Status made = run_command({"/usr/bin/python3", test::source_path("tests/python/torchscript_modules.py"), out}, 120s);
    if (!made.is_ok()) {
      FAIL("tests/python/torchscript_modules.py failed (" << made.to_string()
                                                           << "): these tests need Debian's python3-torch (scripts/setup-deps)");
    }
    return out;
  }();
  return dir;
}

// A recipe training `module` (a file in modules_dir()) with relative paths, as a user would write it.
std::string write_recipe(const std::string& module, const std::string& model_extra = "") {
  const std::string path = modules_dir() + "/" + module + ".yaml";
  std::ofstream(path) << "run_id: torchscript-test\nseed: 1\n"
                      << "model: {kind: torchscript, path: " << module << ".pt" << model_extra << "}\n"
                      << "data: {kind: tensors, paths: [shards]}\n"
                      << "training: {target_batch_size: 64, micro_batch_size: 32}\n"
                      << "optimizer: {kind: sgd, momentum: 0.9}\nschedule: {kind: constant, lr: 0.1}\n"
                      << "averaging: {target_group_size: 2, min_group_size: 2, matchmaking_time: 2, codec: none}\n";
  return path;
}

Result<std::unique_ptr<Task>> build(const std::string& recipe_path, std::int64_t micro_batch = 32) {
  auto recipe = Recipe::load(recipe_path);
  if (!recipe) return recipe.status();
  TaskContext context;
  context.micro_batch_size = micro_batch;
  context.data_seed = 3;
  return recipe->build_task(context);
}

std::string build_error(const std::string& module) {
  auto task = build(write_recipe(module));
  REQUIRE_FALSE(task.is_ok());
  const std::string message = task.status().message();
  CHECK(message.find('\n') == std::string::npos);  // one line, libtorch's backtrace cut
  CHECK_THAT(message, Catch::Contains(modules_dir() + "/" + module + ".pt"));
  return message;
}

}  // namespace

TEST_CASE("TorchScript task: a PyTorch module trains on tensor shards, its loss falls, and it exports itself",
          "[torch][torchscript]") {
  auto task = build(write_recipe("regression", ", no_decay: [bias]"));
  REQUIRE(task.is_ok());
  auto& t = **task;
  CHECK_THAT(t.describe(), Catch::Contains("torchscript regression.pt (161 parameters) on 512 samples"));
  CHECK_THAT(t.describe(), Catch::Contains("inputs: F32 [8], targets: F32 [1]"));
  auto params = t.named_parameters();
  REQUIRE(params.size() == 4);
  CHECK(params[0].first == "net.0.weight");
  CHECK(params[3].first == "net.2.bias");
  CHECK(t.decays("net.0.weight"));
  CHECK_FALSE(t.decays("net.0.bias"));

  OptimizerOptions sgd;
  sgd.kind = "sgd";
  auto optimizer = make_optimizer(sgd, params, [&t](const std::string& n) { return t.decays(n); });
  REQUIRE(optimizer.is_ok());
  auto mean_loss = [&](int batches) {
    double sum = 0;
    for (int i = 0; i < batches; ++i) {
      auto batch = t.next_batch();
      REQUIRE(batch.is_ok());
      REQUIRE(batch->tensors.size() == 2);
      CHECK(batch->tensors[0].sizes() == torch::IntArrayRef{32, 8});
      sum += t.loss(*batch).item<double>();
    }
    return sum / batches;
  };
  const double before = mean_loss(8);
  for (int step = 0; step < 200; ++step) {
    auto batch = t.next_batch();
    REQUIRE(batch.is_ok());
    t.loss(*batch).backward();
    (*optimizer)->step(0.1);
    for (auto& [name, p] : params) p.mutable_grad().zero_();
  }
  const double after = mean_loss(8);
  INFO("loss " << before << " -> " << after);
  CHECK(after < 0.5 * before);

  // The export is the module with the trained parameters: torch.jit.load gives them back.
  test::ScopedTempDir out;
  auto exported = t.export_model(out.path.string());
  REQUIRE(exported.is_ok());
  CHECK(*exported == (out.path / "model.pt").string());
  auto loaded = torch::jit::load(*exported);
  size_t i = 0;
  for (const auto& item : loaded.named_parameters(true)) {
    REQUIRE(i < params.size());
    CHECK(item.name == params[i].first);
    CHECK(torch::equal(item.value, params[i].second.detach()));
    ++i;
  }
  CHECK(i == params.size());
}

TEST_CASE("TorchScript task: a module's buffers are its state beside the parameters", "[torch][torchscript]") {
  auto task = build(write_recipe("normalized"));
  REQUIRE(task.is_ok());
  std::vector<std::string> parameters, buffers;
  for (const auto& [name, t] : (*task)->named_parameters()) parameters.push_back(name);
  for (const auto& [name, t] : (*task)->named_buffers()) buffers.push_back(name);
  CHECK(parameters == std::vector<std::string>{"norm.weight", "norm.bias", "out.weight", "out.bias"});
  CHECK(buffers == std::vector<std::string>{"norm.running_mean", "norm.running_var", "norm.num_batches_tracked"});
  // Training mode: a forward pass moves the running statistics (they are the module's live tensors).
  auto mean = (*task)->named_buffers()[0].second;
  const auto before = mean.clone();
  auto batch = (*task)->next_batch();
  REQUIRE(batch.is_ok());
  (*task)->loss(*batch);
  CHECK_FALSE(torch::equal(before, mean));
}

TEST_CASE("TorchScript task: each wrong module or data set is one error line naming the file", "[torch][torchscript]") {
  CHECK_THAT(build_error("wrong_signature"), Catch::Contains("forward must be forward(self, batch: Dict[str, Tensor]) -> Tensor"));
  CHECK_THAT(build_error("not_scalar"), Catch::Contains("shape [32, 1], not the batch's mean loss (a floating-point scalar)"));
  CHECK_THAT(build_error("detached"), Catch::Contains("does not depend on any parameter"));
  const std::string missing = build_error("missing_key");
  CHECK_THAT(missing, Catch::Contains("forward failed on a batch of {inputs: Float [32, 8], targets: Float [32, 1]}"));
  // The interpreter's error and where in the Python source it happened, not its traceback.
  CHECK_THAT(missing, Catch::Contains("RuntimeError: KeyError: features"));
  CHECK_THAT(missing, Catch::Contains("torchscript_modules.py\", line"));
  CHECK_THAT(build_error("no_parameters"), Catch::Contains("the module has no parameters to train"));

  // A file that is not TorchScript at all (a state dict saved with torch.save would be the usual mistake).
  std::ofstream(modules_dir() + "/garbage.pt") << "not a zip archive";
  CHECK_THAT(build_error("garbage"), Catch::Contains("not a TorchScript module (save one with torch.jit.save"));

  auto absent = build(write_recipe("absent"));
  REQUIRE_FALSE(absent.is_ok());
  CHECK(absent.status().message() == modules_dir() + "/absent.pt: no such TorchScript file");

  // Recipe errors name the recipe and the key, before anything is loaded.
  const std::string recipe = modules_dir() + "/bad-data.yaml";
  std::ofstream(recipe) << "model: {kind: torchscript, path: regression.pt}\ndata: {kind: text}\n";
  auto loaded = Recipe::load(recipe);
  REQUIRE_FALSE(loaded.is_ok());
  CHECK_THAT(loaded.status().message(), Catch::Contains(recipe + ": data: kind: a torchscript model trains on 'tensors' data"));
}

TEST_CASE("TorchScript task: a peer joining a run in progress downloads the swarm's parameters", "[proc][torchscript]") {
  auto first = test::TrainerProcess::start("first", {.recipe = write_recipe("regression"), .data_seed = 1});
  REQUIRE(first.has_value());
  REQUIRE(test::pump_until({&*first}, 60s, [&] { return first->epoch() >= 5; }));
  auto joiner = test::TrainerProcess::start(
      "joiner", {.recipe = write_recipe("regression"), .initial_peer = first->address(), .data_seed = 2,
                 .extra = {"--params-hash"}});
  REQUIRE(joiner.has_value());
  REQUIRE(test::pump_until({&*first, &*joiner}, 60s, [&] { return joiner->find("loaded_state").has_value(); }));
  auto loaded = joiner->find("loaded_state");
  INFO(loaded->dump());
  CHECK(loaded->at("epoch").get<std::uint64_t>() >= 5);
  // Then it trains with the run: a step averaged with the first peer.
  CHECK(test::pump_until({&*first, &*joiner}, 60s, [&] { return joiner->averaged_rounds() > 0; }));
}

TEST_CASE("TorchScript task: a peer whose module has other parameters is refused by the run", "[proc][torchscript]") {
  auto first = test::TrainerProcess::start("first", {.recipe = write_recipe("regression"), .min_peers = 2});
  REQUIRE(first.has_value());
  auto run = test::run_command(test::binary_path("tools/dedloc-train/dedloc-train") +
                               " --listen tcp://127.0.0.1:0 --avg-listen tcp://127.0.0.1:0 --recipe " +
                               write_recipe("wider") + " --initial-peers " + first->address());
  INFO(run.output);
  CHECK(run.exit_code != 0);
  CHECK_THAT(run.output, Catch::Contains("run 'torchscript-test' trains another model"));
}
