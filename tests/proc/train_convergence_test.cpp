// Convergence: the shipped ALBERT and SwAV recipes and the GPT example's, run collaboratively by two
// dedloc-train processes on CPU for a fixed number of global steps, lower their loss by a stated margin.
// The numbers are printed (WARN) and recorded in bench/README.md. The ALBERT run's Hugging Face export at
// exit is checked against its model.safetensors.
#include <cmath>
#include <cstring>
#include <filesystem>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "dedloc/collab/checkpoint.hpp"
#include "dedloc/collab/hf_export.hpp"
#include "dedloc/core/files.hpp"
#include "dedloc/core/safetensors.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"
#include "support/trainer_process.hpp"

using namespace std::chrono_literals;
using dedloc::test::TrainerArgs;
using dedloc::test::TrainerProcess;
using dedloc::test::mean_loss;
using dedloc::test::pump_until;

namespace {

struct Convergence {
  double first = 0, last = 0;  // mean loss of the first and of the last three steps, peer 0
  size_t found_ahead = 0;      // peer 0's averaged steps whose group formed while it still computed
  std::string checkpoint_dir;  // peer 0's --checkpoint-dir
};

// Two peers train `recipe` for `epochs` global steps, nearly all of them averaged: on a loaded machine a
// peer may miss a group now and then and step with its own gradients (event "local").
Convergence run_pair(const std::string& recipe, std::uint64_t epochs) {
  const std::string dir = dedloc::test::make_temp_dir("dedloc-convergence");
  TrainerArgs args{.recipe = recipe, .data_seed = 1, .max_epochs = epochs, .min_peers = 2,
                   .checkpoint_dir = dir + "/a"};
  auto a = TrainerProcess::start("a", args);
  REQUIRE(a.has_value());
  args.initial_peer = a->address();
  args.data_seed = 2;
  args.checkpoint_dir = dir + "/b";
  auto b = TrainerProcess::start("b", args);
  REQUIRE(b.has_value());
  REQUIRE(pump_until({&*a, &*b}, 600s, [&] { return a->find("exit") && b->find("exit"); }));
  CHECK(a->process().wait(30s) == 0);
  CHECK(b->process().wait(30s) == 0);

  for (auto* p : {&*a, &*b}) {
    INFO("peer " << p->name());
    auto steps = p->steps();
    REQUIRE(steps.size() == epochs);
    std::uint64_t averaged = 0;
    for (const auto& s : steps) {
      averaged += s["event"] == "averaged";
      CHECK(s["event"] != "alone");  // the peers always knew of each other
      CHECK(std::isfinite(s["loss"].get<double>()));
    }
    CHECK(averaged * 3 >= epochs * 2);
  }
  auto steps = a->steps();
  size_t ahead = 0;
  for (const auto& s : steps) ahead += s.value("found_ahead", false);
  // Matchmaking ahead of time: each step's search starts once the ETA is within matchmaking_time (5 s),
  // seconds before the batch is complete. 15 of 15 on an idle machine; a loaded one may start some late.
  CHECK(ahead * 3 >= epochs);
  return {*mean_loss(steps, 1, 3), *mean_loss(steps, epochs - 2, epochs), ahead, dir + "/a"};
}

}  // namespace

TEST_CASE("albert-tiny: two peers lower the masked-LM + sentence-order loss", "[proc][train][convergence]") {
  auto loss = run_pair("recipes/albert-tiny.yaml", 15);
  WARN("albert-tiny, 2 peers, 15 steps of 128: loss " << loss.first << " -> " << loss.last << "; "
       << loss.found_ahead << " groups found ahead");
  // From ln(8000) + ln(2) = 9.68 (uniform guesses) toward the corpus's token statistics.
  CHECK(loss.first > 9.3);
  CHECK(loss.last < loss.first - 0.8);

  // At its end the peer wrote its model for transformers beside the checkpoints (Task::export_model): the
  // folder of lib/dedloc/collab/hf_export.hpp, with the weights of model.safetensors and the tokenizer
  // this run trained; model.safetensors carries the shape that a tool without torch needs (the state entry).
  const std::string& dir = loss.checkpoint_dir;
  auto model = dedloc::collab::load_checkpoint(dir + "/model.safetensors");
  REQUIRE(model.is_ok());
  auto config = dedloc::collab::albert_config_of(model->state);
  INFO(config.status().to_string());
  REQUIRE(config.is_ok());
  const std::string hf = dir + "/hf";
  const std::string file = dedloc::read_file(hf + "/model.safetensors").value();
  auto header = dedloc::safetensors::parse_header(dedloc::as_bytes(file), file.size());
  REQUIRE(header.is_ok());
  const auto* words = header->find("albert.embeddings.word_embeddings.weight");
  REQUIRE(words != nullptr);
  auto trained = model->state.tensor(*model->state.find("embeddings.word_embeddings.weight"));
  REQUIRE(words->bytes() == trained.size() * sizeof(float));
  CHECK(std::memcmp(file.data() + header->data_offset + words->begin, trained.data(), words->bytes()) == 0);
  auto hf_config = nlohmann::json::parse(dedloc::read_file(hf + "/config.json").value());
  CHECK(hf_config["vocab_size"] == config->vocab_size);
  CHECK(hf_config["num_hidden_layers"] == 4);  // recipes/albert-tiny.yaml: size tiny
  std::string tokenizer;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("albert-spm-", 0) == 0) tokenizer = entry.path().string();
  }
  REQUIRE_FALSE(tokenizer.empty());
  CHECK(dedloc::read_file(hf + "/spiece.model").value() == dedloc::read_file(tokenizer).value());
  CHECK(std::filesystem::exists(hf + "/tokenizer_config.json"));
}

TEST_CASE("swav-fmnist: two peers lower the SwAV swapped-prediction loss", "[proc][train][convergence]") {
  auto loss = run_pair("recipes/swav-fmnist.yaml", 15);
  WARN("swav-fmnist, 2 peers, 15 steps of 256: loss " << loss.first << " -> " << loss.last << "; "
       << loss.found_ahead << " groups found ahead");
  CHECK(loss.last < loss.first - 0.2);
}

TEST_CASE("examples/gpt: two peers lower a PyTorch GPT's loss through the TorchScript task", "[proc][train][convergence]") {
  // What examples/gpt/README.md tells a user to do: prepare.py, then two peers of the recipe it wrote (with a
  // global batch of 256 rather than 512, to keep the suite fast).
  const std::string dir = dedloc::test::make_temp_dir("dedloc-gpt-example");
  auto prepared = dedloc::test::run_command("/usr/bin/python3 " + dedloc::test::source_path("examples/gpt/prepare.py") +
                                            " --out " + dir);
  INFO(prepared.output);
  REQUIRE(prepared.exit_code == 0);
  const std::string recipe = dedloc::test::write_recipe_variant(
      "examples/gpt/recipe.yaml", dir, "recipe-test.yaml", {{"target_batch_size: 512", "target_batch_size: 256"}});
  auto loss = run_pair(recipe, 20);
  WARN("examples/gpt, 2 peers, 20 steps of 256: loss " << loss.first << " -> " << loss.last);
  // From ln(256) = 5.55 (uniform bytes) toward the fortunes' byte statistics (4.2-4.5 after 5,000 samples in
  // plain PyTorch with the same steps).
  CHECK(loss.first > 5.3);
  CHECK(loss.last < loss.first - 0.7);
  // At exit the peer wrote its module with the trained parameters, for torch.jit.load (a zip archive).
  const auto module = dedloc::read_file(loss.checkpoint_dir + "/model.pt", 64u << 20);
  REQUIRE(module.is_ok());
  CHECK(module->rfind("PK", 0) == 0);
}
