// Equivalence: two collaborating dedloc-train processes compute large-batch SGD exactly. The
// peers log which samples they put into each global step; this test replays those steps in one process
// (the same model, the same samples per step, the mean gradient over them, the same optimizer) and checks
// that the peers' final parameters equal the replay's. The peers draw different samples (different data
// seeds) and contribute unequal weights (micro-batches of 32 and 48 samples, so their counts per step
// differ), both checked: otherwise a peer stepping with its own gradient, or an average that ignored the
// weights, would end at the same parameters.
//
// The same holds for a user's model: an MLP written and scripted by PyTorch (tests/python/mlp_torchscript.py),
// trained through the TorchScript task on the built-in task's data as a tensor shard, ends where the
// built-in MLP's replay ends when that replay starts from the PyTorch module's initial parameters.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include <numeric>

#include <torch/script.h>

#include "dedloc/collab/checkpoint.hpp"
#include "dedloc/core/files.hpp"
#include "dedloc/core/run_command.hpp"
#include "dedloc/core/safetensors.hpp"
#include "dedloc/train/models/mlp_task.hpp"
#include "dedloc/train/recipe.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"
#include "support/trainer_process.hpp"

using namespace dedloc;
using namespace dedloc::train;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t kEpochs = 8;
// Per peer: their counts in a step can be equal only at a common multiple of 96 samples, so over the run's
// steps some differ.
constexpr std::int64_t kMicroBatchA = 32, kMicroBatchB = 48;
// tests/data/mlp-equivalence.yaml's data section.
const RegressionDataOptions kEquivalenceData{16, 1, 4096, 0.01, 7, 32};

struct StepLog {
  bool averaged = false;
  std::vector<std::uint64_t> ids;
};

// "<epoch> averaged|alone id id ..." per line.
std::map<std::uint64_t, StepLog> read_samples_log(const std::string& path) {
  std::map<std::uint64_t, StepLog> steps;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::uint64_t epoch = 0;
    std::string how;
    words >> epoch >> how;
    StepLog& step = steps[epoch];
    step.averaged = how == "averaged";
    std::uint64_t id;
    while (words >> id) step.ids.push_back(id);
  }
  return steps;
}

test::ChildProcess start_peer(const std::string& recipe, const std::string& dir, int data_seed, std::int64_t micro_batch,
                              const std::string& initial_peer) {
  std::vector<std::string> args{test::binary_path("tools/dedloc-train/dedloc-train"),
                                "--recipe", recipe,
                                "--listen", "tcp://127.0.0.1:0", "--avg-listen", "tcp://127.0.0.1:0",
                                "--threads", "1", "--max-epochs", std::to_string(kEpochs), "--min-peers", "2",
                                "--data-seed", std::to_string(data_seed), "--batch-size", std::to_string(micro_batch),
                                "--samples-log", dir + "/samples.log",
                                "--checkpoint-dir", dir, "--log-level", "warning"};
  if (!initial_peer.empty()) args.insert(args.end(), {"--initial-peers", initial_peer});
  return test::ChildProcess::spawn(args);
}

// Two peers of `recipe` (micro-batches of kMicroBatchA and kMicroBatchB samples, different data orders)
// run kEpochs global steps; checks that this was a collaboration with unequal weights and returns what
// each peer logged. Their checkpoints are in root/a and root/b.
struct TwoPeerRun {
  std::string dir_a, dir_b;
  std::map<std::uint64_t, StepLog> log_a, log_b;
};

TwoPeerRun run_two_peers(const std::string& recipe, const std::string& root) {
  TwoPeerRun run{root + "/a", root + "/b", {}, {}};
  std::filesystem::create_directories(run.dir_a);
  std::filesystem::create_directories(run.dir_b);
  auto a = start_peer(recipe, run.dir_a, 1, kMicroBatchA, "");
  auto ready = a.read_line(60s);
  REQUIRE(ready.has_value());
  auto address = nlohmann::json::parse(*ready)["endpoints"][0].get<std::string>();
  auto b = start_peer(recipe, run.dir_b, 2, kMicroBatchB, address);
  REQUIRE(b.read_line(60s).has_value());
  REQUIRE(a.wait(120s) == 0);
  REQUIRE(b.wait(60s) == 0);

  // Every step was averaged by both peers: this was a collaboration, not two solo runs.
  auto& log_a = run.log_a = read_samples_log(run.dir_a + "/samples.log");
  auto& log_b = run.log_b = read_samples_log(run.dir_b + "/samples.log");
  REQUIRE(log_a.size() == kEpochs);
  REQUIRE(log_b.size() == kEpochs);
  size_t unequal_steps = 0;
  for (std::uint64_t e = 0; e < kEpochs; ++e) {
    INFO("epoch " << e << ": " << log_a[e].ids.size() << " and " << log_b[e].ids.size() << " samples");
    CHECK(log_a[e].averaged);
    CHECK(log_b[e].averaged);
    REQUIRE(log_a[e].ids.size() % kMicroBatchA == 0);
    REQUIRE(log_b[e].ids.size() % kMicroBatchB == 0);
    // Different samples: each peer reads its own order of the data set (a few ids in common by chance).
    std::vector<std::uint64_t> ids_a = log_a[e].ids, ids_b = log_b[e].ids, common;
    std::sort(ids_a.begin(), ids_a.end());
    std::sort(ids_b.begin(), ids_b.end());
    std::set_intersection(ids_a.begin(), ids_a.end(), ids_b.begin(), ids_b.end(), std::back_inserter(common));
    CHECK(common.size() * 4 < std::min(ids_a.size(), ids_b.size()));
    unequal_steps += ids_a.size() != ids_b.size();
  }
  // Unequal weights: the average is weighted by samples, and only steps where the counts differ tell a
  // weighted mean from a plain one.
  CHECK(unequal_steps > 0);
  return run;
}

// The replay: one process, the same initial parameters (`task`'s), per step the mean gradient over the
// union of the samples both peers used in that step, micro-batch by micro-batch as the peers computed it:
// each micro-batch's gradient is a mean over its samples, so it counts with its size.
NamedTensors replay(const Recipe& recipe, Task& t, const RegressionData& data, TwoPeerRun& run) {
  auto params = t.named_parameters();
  auto optimizer = make_optimizer(recipe.optimizer, params, [&t](const std::string& n) { return t.decays(n); });
  REQUIRE(optimizer.is_ok());
  for (std::uint64_t e = 0; e < kEpochs; ++e) {
    std::vector<torch::Tensor> sums;
    for (auto& [n, p] : params) sums.push_back(torch::zeros_like(p));
    size_t samples = 0;
    for (const auto& [ids, micro_batch] : {std::pair{&run.log_a[e].ids, kMicroBatchA}, std::pair{&run.log_b[e].ids, kMicroBatchB}}) {
      const auto size = static_cast<size_t>(micro_batch);
      for (size_t first = 0; first < ids->size(); first += size) {
        std::vector<std::uint64_t> micro(ids->begin() + static_cast<std::ptrdiff_t>(first),
                                         ids->begin() + static_cast<std::ptrdiff_t>(first + size));
        t.loss(data.batch(micro, torch::kCPU)).backward();
        torch::NoGradGuard no_grad;
        for (size_t i = 0; i < params.size(); ++i) {
          sums[i].add_(params[i].second.grad() * static_cast<double>(size));
          params[i].second.mutable_grad().zero_();
        }
        samples += size;
      }
    }
    {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < params.size(); ++i) params[i].second.mutable_grad().copy_(sums[i] / static_cast<double>(samples));
    }
    (*optimizer)->step(learning_rate(recipe.schedule, e));
    for (auto& [n, p] : params) p.mutable_grad().zero_();  // the next step's backward must start from zero
  }

  return params;
}

// The replay's recipe and task, built as the peers built theirs (the same init_seed).
std::pair<Recipe, std::unique_ptr<Task>> replay_task(const std::string& recipe_path) {
  auto recipe = Recipe::load(recipe_path);
  REQUIRE(recipe.is_ok());
  TaskContext context;
  context.init_seed = recipe->seed;
  context.micro_batch_size = kMicroBatchA;
  auto task = recipe->build_task(context);
  REQUIRE(task.is_ok());
  return {std::move(*recipe), std::move(*task)};
}

// Each peer's exported model (model.safetensors: parameters in the task's order) equals the replay's.
void check_peers_end_at(const TwoPeerRun& run, const NamedTensors& params) {
  for (const auto& dir : {run.dir_a, run.dir_b}) {
    INFO("peer " << dir);
    auto checkpoint = collab::load_checkpoint(dir + "/model.safetensors");
    REQUIRE(checkpoint.is_ok());
    CHECK(checkpoint->state.epoch() == kEpochs);
    REQUIRE(checkpoint->state.size() >= params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      const auto& [n, p] = params[i];
      INFO(n << " against the peers' " << checkpoint->state.tensors()[i].name);
      auto values = checkpoint->state.tensor(i);
      REQUIRE(values.size() == static_cast<size_t>(p.numel()));
      auto theirs = torch::from_blob(const_cast<float*>(values.data()), p.sizes(), torch::kFloat32);
      double difference = (theirs - p.detach()).abs().max().item<double>();
      double scale = p.detach().abs().max().item<double>();
      INFO("max |peer − replay| = " << difference << " (max |w| = " << scale << ")");
      CHECK(difference <= 1e-5 * std::max(1.0, scale));
    }
  }
}

}  // namespace

TEST_CASE("Two collaborating peers end with the parameters of one process taking the same large-batch steps",
          "[proc][train]") {
  char name[] = "/tmp/dedloc-equivalence-XXXXXX";
  const std::string root = ::mkdtemp(name);
  auto run = run_two_peers(test::source_path("tests/data/mlp-equivalence.yaml"), root);

  auto [recipe, task] = replay_task(test::source_path("tests/data/mlp-equivalence.yaml"));
  check_peers_end_at(run, replay(recipe, *task, RegressionData(kEquivalenceData), run));
  std::filesystem::remove_all(root);
}

TEST_CASE("A TorchScript MLP exported from PyTorch computes the built-in MLP's steps: two peers end where the "
          "built-in task's replay ends",
          "[proc][train][torchscript]") {
  char name[] = "/tmp/dedloc-equivalence-XXXXXX";
  const std::string root = ::mkdtemp(name);
  // The built-in task's data set as a tensor shard, and the same network written by PyTorch.
  const RegressionData data(kEquivalenceData);
  std::vector<std::uint64_t> all(static_cast<size_t>(data.size()));
  std::iota(all.begin(), all.end(), std::uint64_t{0});
  const Batch everything = data.batch(all, torch::kCPU);
  auto column = [](const std::string& tensor_name, const torch::Tensor& t) {
    std::vector<std::uint64_t> shape(t.sizes().begin(), t.sizes().end());
    return safetensors::TensorBytes{tensor_name, safetensors::DType::kF32, shape,
                                    ByteSpan(static_cast<const std::uint8_t*>(t.data_ptr()), t.nbytes())};
  };
  auto shard = safetensors::encode({column("inputs", everything.tensors[0].contiguous()), column("targets", everything.tensors[1].contiguous())});
  REQUIRE(shard.is_ok());
  REQUIRE(write_file_atomically(root + "/regression.safetensors", *shard).is_ok());
  Status exported = run_command({"/usr/bin/python3", test::source_path("tests/python/mlp_torchscript.py"), "--inputs", "16",
                                 "--hidden", "32", "--layers", "2", "--outputs", "1", "--seed", "11", "--out", root + "/mlp.pt"},
                                120s);
  REQUIRE(exported.is_ok());
  // mlp-equivalence.yaml with the model and data replaced (paths relative to the recipe).
  const std::string recipe_path = test::write_recipe_variant(
      "tests/data/mlp-equivalence.yaml", root, "torchscript.yaml",
      {{"model: {kind: mlp, inputs: 16, hidden: 32, layers: 2, outputs: 1}", "model: {kind: torchscript, path: mlp.pt}"},
       {"data: {kind: regression, samples: 4096, noise: 0.01, seed: 7}", "data: {kind: tensors, paths: [regression.safetensors]}"}});
  auto run = run_two_peers(recipe_path, root);

  // The replay runs the built-in MLP task, started from the PyTorch module's initial parameters.
  auto [recipe, task] = replay_task(test::source_path("tests/data/mlp-equivalence.yaml"));
  auto module = torch::jit::load(root + "/mlp.pt");
  auto params = task->named_parameters();
  size_t i = 0;
  for (const auto& item : module.named_parameters(true)) {
    REQUIRE(i < params.size());
    REQUIRE(item.value.sizes() == params[i].second.sizes());
    torch::NoGradGuard no_grad;
    params[i++].second.copy_(item.value);
  }
  REQUIRE(i == params.size());
  check_peers_end_at(run, replay(recipe, *task, data, run));
  std::filesystem::remove_all(root);
}

TEST_CASE("DiLoCo with one inner SGD step per outer step, outer lr 1 and no momentum takes the synchronous steps",
          "[proc][train][diloco]") {
  char name[] = "/tmp/dedloc-equivalence-XXXXXX";
  const std::string root = ::mkdtemp(name);
  // Plain SGD inside (momentum would be each peer's own), one inner step per outer step (inner_batch_size
  // above any peer's share), and an outer step that applies the averaged pseudo-gradient as it is.
  const std::string sgd = "optimizer: {kind: sgd, momentum: 0}";
  const std::string synchronous = test::write_recipe_variant("tests/data/mlp-equivalence.yaml", root, "synchronous.yaml",
                                                             {{"optimizer: {kind: sgd, momentum: 0.9}", sgd}});
  const std::string diloco = test::write_recipe_variant(
      "tests/data/mlp-equivalence.yaml", root, "diloco.yaml",
      {{"optimizer: {kind: sgd, momentum: 0.9}",
        sgd + "\ncollaboration: {mode: diloco, inner_batch_size: 100000, outer_lr: 1, outer_momentum: 0}"}});
  auto run = run_two_peers(diloco, root);
  // The peers ran DiLoCo: their state holds the outer momentum beside θ_outer.
  auto state = collab::load_checkpoint(run.dir_a + "/checkpoint.safetensors");
  REQUIRE(state.is_ok());
  CHECK(state->state.find("outer_momentum/0.weight").has_value());

  auto [recipe, task] = replay_task(synchronous);
  check_peers_end_at(run, replay(recipe, *task, RegressionData(kEquivalenceData), run));
  std::filesystem::remove_all(root);
}
