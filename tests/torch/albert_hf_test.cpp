// The Hugging Face export of dedloc's ALBERT, checked independently: dedloc's model computes masked-LM
// logits, the folder it exports is read by tests/python/albert_hf_reference.py (transformers'
// AlbertForMaskedLM forward pass in plain PyTorch, written from modeling_albert.py, run by Debian's
// /usr/bin/python3 with python3-torch), and both logits must agree. Also: what AlbertTask publishes in the
// training state and what its Task::export_model writes, with the tokenizer the run really trained.
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "dedloc/collab/hf_export.hpp"
#include "dedloc/core/files.hpp"
#include "dedloc/core/safetensors.hpp"
#include "dedloc/train/models/albert.hpp"
#include "dedloc/train/models/albert_export.hpp"
#include "dedloc/train/models/albert_task.hpp"
#include "albert_test_recipe.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

// Debian's libtorch logs through glog, whose CHECK(condition) macro would replace Catch's: torch headers
// come first, then Catch defines CHECK afresh.
#undef CHECK
#include <catch2/catch.hpp>

using namespace dedloc;
using namespace dedloc::train;
namespace fs = std::filesystem;

namespace {

constexpr const char* kPython = "/usr/bin/python3";

// Debian's Python must have torch and numpy (scripts/setup-deps installs python3-torch): say so plainly.
void require_python_torch() {
  auto probe = test::run_command(std::string(kPython) + " -c 'import torch, numpy' 2>&1");
  INFO(kPython << " cannot import torch and numpy (scripts/setup-deps installs python3-torch): " << probe.output);
  REQUIRE(probe.exit_code == 0);
}

// Every parameter drawn afresh, biases and LayerNorm weights included, so that a tensor exported under
// the wrong name (query for key, a bias dropped) changes the logits.
void randomize(AlbertModelImpl& model) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(20240611);
  for (auto& item : model.named_parameters()) {
    auto& p = item.value();
    const bool norm_weight = item.key().find("LayerNorm.weight") != std::string::npos ||
                             item.key().find("layer_norm.weight") != std::string::npos;
    p.copy_(norm_weight ? 1.0 + 0.2 * torch::randn(p.sizes()) : 0.2 * torch::randn(p.sizes()));
  }
}

torch::Tensor rows(const std::vector<std::vector<std::int64_t>>& values) {
  const auto B = static_cast<std::int64_t>(values.size()), T = static_cast<std::int64_t>(values[0].size());
  auto out = torch::empty({B, T}, torch::kLong);
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t t = 0; t < T; ++t) out[b][t] = values[static_cast<size_t>(b)][static_cast<size_t>(t)];
  }
  return out;
}

nlohmann::json to_json(const torch::Tensor& t) {
  nlohmann::json out = nlohmann::json::array();
  for (std::int64_t b = 0; b < t.size(0); ++b) {
    nlohmann::json row = nlohmann::json::array();
    for (std::int64_t i = 0; i < t.size(1); ++i) row.push_back(t[b][i].item<std::int64_t>());
    out.push_back(row);
  }
  return out;
}

}  // namespace

TEST_CASE("transformers' ALBERT forward pass on the exported folder gives dedloc's masked-LM logits",
          "[torch][albert][hf]") {
  require_python_torch();
  AlbertConfig config;
  config.vocab_size = 40;
  config.embedding_size = 16;
  config.hidden_size = 32;
  config.num_layers = 3;
  config.num_heads = 4;
  config.intermediate_size = 64;
  config.max_length = 16;
  REQUIRE(validate_albert_config(config).is_ok());
  AlbertModel model(config, 7);
  randomize(*model);
  model->eval();

  // [CLS] A [SEP] B [SEP] with segments 0 and 1, padded with [PAD] (0) behind a zero attention mask; row 2
  // holds [MASK] (4) tokens.
  auto input_ids = rows({{2, 11, 12, 13, 3, 21, 22, 23, 24, 3},
                         {2, 5, 39, 3, 17, 18, 3, 0, 0, 0},
                         {2, 4, 30, 3, 4, 3, 0, 0, 0, 0}});
  auto token_type_ids = rows({{0, 0, 0, 0, 0, 1, 1, 1, 1, 1},
                              {0, 0, 0, 0, 1, 1, 1, 0, 0, 0},
                              {0, 0, 0, 0, 1, 1, 0, 0, 0, 0}});
  auto attention_mask = rows({{1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
                              {1, 1, 1, 1, 1, 1, 1, 0, 0, 0},
                              {1, 1, 1, 1, 1, 1, 0, 0, 0, 0}});
  torch::Tensor expected;
  {
    torch::NoGradGuard no_grad;
    auto hidden = model->forward(input_ids, token_type_ids, attention_mask);
    expected = model->mlm_logits(hidden.reshape({-1, config.hidden_size})).view({3, 10, config.vocab_size});
  }
  REQUIRE(expected.abs().max().item<float>() > 1.0f);  // logits that say something, not all near zero

  test::ScopedTempDir dir{"dedloc-albert-hf"};
  const std::string tokenizer = (dir.path / "spm.model").string();
  REQUIRE(write_file_atomically(tokenizer, "a SentencePiece model, copied as it is").is_ok());
  const std::string folder = (dir.path / "hf").string();
  auto exported = export_albert_hf(*model, tokenizer, folder);
  INFO(exported.status().to_string());
  REQUIRE(exported.is_ok());
  CHECK(*exported == folder);

  const std::string inputs = (dir.path / "inputs.json").string();
  const std::string output = (dir.path / "logits.safetensors").string();
  nlohmann::json json = {{"input_ids", to_json(input_ids)},
                         {"token_type_ids", to_json(token_type_ids)},
                         {"attention_mask", to_json(attention_mask)}};
  REQUIRE(write_file_atomically(inputs, json.dump()).is_ok());
  const std::string script = test::source_path("tests/python/albert_hf_reference.py");
  auto run = test::run_command(std::string(kPython) + " " + script + " " + folder + " --inputs " + inputs +
                               " --output " + output + " 2>&1");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.rfind("ok: 28 tensors match AlbertForMaskedLM's layout", 0) == 0);

  const std::string file = read_file(output).value();
  auto header = safetensors::parse_header(as_bytes(file), file.size());
  REQUIRE(header.is_ok());
  const auto* logits = header->find("logits");
  REQUIRE(logits != nullptr);
  REQUIRE(logits->shape == std::vector<std::uint64_t>{3, 10, 40});
  auto reference = torch::empty({3, 10, 40}, torch::kFloat32);
  std::memcpy(reference.data_ptr<float>(), file.data() + header->data_offset + logits->begin, logits->bytes());
  const float difference = (reference - expected).abs().max().item<float>();
  WARN("dedloc vs the transformers reference: max |logit difference| " << difference);
  CHECK(difference < 1e-4f);

  // The reference checks the layout for real: a config with a second layer group wants tensors the
  // folder does not have.
  auto config_json = nlohmann::json::parse(read_file(folder + "/config.json").value());
  config_json["num_hidden_groups"] = 2;
  REQUIRE(write_file_atomically(folder + "/config.json", config_json.dump()).is_ok());
  auto refused = test::run_command(std::string(kPython) + " " + script + " " + folder + " 2>&1");
  CHECK(refused.exit_code == 1);
  CHECK(refused.output.find("missing tensor albert.encoder.albert_layer_groups.1.albert_layers.0.ffn.weight") !=
        std::string::npos);
}

TEST_CASE("AlbertTask publishes its shape in the training state and exports with the tokenizer it trained",
          "[torch][albert][hf]") {
  const AlbertRecipe recipe = test::small_albert_recipe();
  TaskContext context;
  context.micro_batch_size = 4;
  context.work_dir = test::albert_cache_dir();  // shared with albert_test.cpp: trained once
  auto task = make_albert_task(recipe, context);
  INFO(task.status().to_string());
  REQUIRE(task.is_ok());

  auto entries = (*task)->state_entries();
  REQUIRE(entries.count(std::string(collab::kAlbertConfigEntry)) == 1);
  auto published = collab::parse_albert_config(entries.at(std::string(collab::kAlbertConfigEntry)));
  REQUIRE(published.is_ok());
  CHECK(*published == albert_hf_config((*task)->config()));
  CHECK(published->vocab_size == (*task)->config().vocab_size);  // the tokenizer's real vocabulary
  CHECK(published->hidden_act == "gelu_new");

  const std::string& tokenizer = (*task)->tokenizer_model();
  CHECK(fs::path(tokenizer).filename().string().rfind("albert-spm-1000-", 0) == 0);
  REQUIRE(fs::exists(tokenizer));
  test::ScopedTempDir dir{"dedloc-albert-hf"};
  auto exported = (*task)->export_model(dir.path.string());  // as the trainer calls it: its checkpoint dir
  INFO(exported.status().to_string());
  REQUIRE(exported.is_ok());
  CHECK(*exported == (dir.path / "hf").string());
  CHECK(read_file(*exported + "/spiece.model").value() == read_file(tokenizer).value());
  auto hf = nlohmann::json::parse(read_file(*exported + "/config.json").value());
  CHECK(hf["vocab_size"] == (*task)->config().vocab_size);
  CHECK(hf["num_hidden_layers"] == 2);

  // Without a work directory the tokenizer is gone with its temporary folder: said so, nothing written.
  context.work_dir.clear();
  auto without = make_albert_task(recipe, context);
  REQUIRE(without.is_ok());
  test::ScopedTempDir other{"dedloc-albert-hf"};
  auto refused = (*without)->export_model(other.path.string());
  CHECK(refused.status().code() == Code::kNotFound);
  CHECK_FALSE(fs::exists(other.path / "hf"));
}
