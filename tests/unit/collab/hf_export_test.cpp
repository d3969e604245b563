// The Hugging Face export of ALBERT without torch (collab/hf_export.hpp): the name and shape mapping to
// transformers' AlbertForMaskedLM, the folder's files read back byte for byte, its replacement, and every bad
// input's one-line error. (That transformers' forward pass on the folder gives dedloc's logits is checked by
// tests/torch/albert_hf_test.cpp against tests/python/albert_hf_reference.py.)
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "dedloc/collab/hf_export.hpp"
#include "dedloc/core/files.hpp"
#include "dedloc/core/safetensors.hpp"
#include "support/albert_state.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;
using namespace dedloc::collab;
namespace fs = std::filesystem;

namespace {

AlbertHfConfig small_config() {
  AlbertHfConfig c;
  c.vocab_size = 50;
  c.embedding_size = 8;
  c.hidden_size = 12;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 3;
  c.intermediate_size = 20;
  c.max_position_embeddings = 16;
  c.type_vocab_size = 2;
  c.hidden_dropout_prob = 0.1;
  c.attention_probs_dropout_prob = 0.1;
  c.layer_norm_eps = 1e-12;
  c.initializer_range = 0.02;
  c.hidden_act = "gelu_new";
  return c;
}

std::string write_tokenizer(const fs::path& dir, const std::string& contents = std::string("spm\0model", 9)) {
  const auto path = (dir / "albert-spm-50-0123456789abcdef.model").string();
  REQUIRE(write_file_atomically(path, contents).is_ok());
  return path;
}

void check_one_line(const Status& status) {
  INFO(status.to_string());
  CHECK_FALSE(status.is_ok());
  CHECK(status.message().find('\n') == std::string::npos);
}

size_t entries_in(const fs::path& dir) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

}  // namespace

TEST_CASE("ALBERT's tensors map to transformers' AlbertForMaskedLM names with the config's shapes", "[unit][hf]") {
  using Row = std::tuple<std::string, std::string, std::vector<std::uint64_t>>;
  const std::string layer = "albert.encoder.albert_layer_groups.0.albert_layers.0.";
  // V 50, E 8, H 12, I 20, 16 positions, 2 segments; weights of torch.nn.Linear are [out, in].
  const std::vector<Row> expected = {
      {"albert.embeddings.word_embeddings.weight", "embeddings.word_embeddings.weight", {50, 8}},
      {"albert.embeddings.position_embeddings.weight", "embeddings.position_embeddings.weight", {16, 8}},
      {"albert.embeddings.token_type_embeddings.weight", "embeddings.token_type_embeddings.weight", {2, 8}},
      {"albert.embeddings.LayerNorm.weight", "embeddings.LayerNorm.weight", {8}},
      {"albert.embeddings.LayerNorm.bias", "embeddings.LayerNorm.bias", {8}},
      {"albert.encoder.embedding_hidden_mapping_in.weight", "encoder.embedding_hidden_mapping_in.weight", {12, 8}},
      {"albert.encoder.embedding_hidden_mapping_in.bias", "encoder.embedding_hidden_mapping_in.bias", {12}},
      {layer + "attention.query.weight", "encoder.layer.attention.query.weight", {12, 12}},
      {layer + "attention.query.bias", "encoder.layer.attention.query.bias", {12}},
      {layer + "attention.key.weight", "encoder.layer.attention.key.weight", {12, 12}},
      {layer + "attention.key.bias", "encoder.layer.attention.key.bias", {12}},
      {layer + "attention.value.weight", "encoder.layer.attention.value.weight", {12, 12}},
      {layer + "attention.value.bias", "encoder.layer.attention.value.bias", {12}},
      {layer + "attention.dense.weight", "encoder.layer.attention.dense.weight", {12, 12}},
      {layer + "attention.dense.bias", "encoder.layer.attention.dense.bias", {12}},
      {layer + "attention.LayerNorm.weight", "encoder.layer.attention.LayerNorm.weight", {12}},
      {layer + "attention.LayerNorm.bias", "encoder.layer.attention.LayerNorm.bias", {12}},
      {layer + "ffn.weight", "encoder.layer.ffn.weight", {20, 12}},
      {layer + "ffn.bias", "encoder.layer.ffn.bias", {20}},
      {layer + "ffn_output.weight", "encoder.layer.ffn_output.weight", {12, 20}},
      {layer + "ffn_output.bias", "encoder.layer.ffn_output.bias", {12}},
      {layer + "full_layer_layer_norm.weight", "encoder.layer.full_layer_layer_norm.weight", {12}},
      {layer + "full_layer_layer_norm.bias", "encoder.layer.full_layer_layer_norm.bias", {12}},
      {"predictions.dense.weight", "predictions.dense.weight", {8, 12}},
      {"predictions.dense.bias", "predictions.dense.bias", {8}},
      {"predictions.LayerNorm.weight", "predictions.LayerNorm.weight", {8}},
      {"predictions.LayerNorm.bias", "predictions.LayerNorm.bias", {8}},
      {"predictions.bias", "predictions.bias", {50}},
  };
  std::vector<Row> got;
  for (const auto& t : albert_hf_tensors(small_config())) got.emplace_back(t.hf_name, t.dedloc_name, t.shape);
  CHECK(got == expected);
}

TEST_CASE("The config entry round-trips, and each bad field is named", "[unit][hf]") {
  const auto config = small_config();
  auto parsed = parse_albert_config(albert_config_json(config));
  REQUIRE(parsed.is_ok());
  CHECK(*parsed == config);

  auto with = [&](const std::function<void(nlohmann::json&)>& change) {
    auto json = nlohmann::json::parse(albert_config_json(config));
    change(json);
    return parse_albert_config(json.dump()).status();
  };
  auto expect = [](const Status& status, const std::string& words) {
    INFO(status.to_string());
    CHECK(status.code() == Code::kMalformed);
    CHECK(status.message().find(words) != std::string::npos);
  };
  expect(with([](auto& j) { j.erase("hidden_size"); }), "'hidden_size' is missing");
  expect(with([](auto& j) { j.erase("layer_norm_eps"); }), "'layer_norm_eps' is missing");
  expect(with([](auto& j) { j.erase("hidden_act"); }), "'hidden_act' is missing");
  expect(with([](auto& j) { j["num_hidden_groups"] = 2; }), "unknown field 'num_hidden_groups'");
  expect(with([](auto& j) { j["vocab_size"] = "50"; }), "'vocab_size' is not an integer");
  expect(with([](auto& j) { j["num_attention_heads"] = 5; }), "not divisible by num_attention_heads 5");
  expect(with([](auto& j) { j["intermediate_size"] = 0; }), "intermediate_size is 0");
  expect(with([](auto& j) { j["hidden_dropout_prob"] = 1.0; }), "outside [0, 1)");
  expect(parse_albert_config("{not json").status(), "not a JSON object");
}

TEST_CASE("The folder holds the weights under transformers' names, config.json and the tokenizer", "[unit][hf]") {
  test::ScopedTempDir dir{"dedloc-hf"};
  const auto config = small_config();
  const auto state = test::albert_state(config);
  const std::string tokenizer = write_tokenizer(dir.path);
  const std::string out = (dir.path / "export" / "hf").string();  // the parent is created too
  REQUIRE(write_albert_hf_folder(state, tokenizer, out).is_ok());

  std::set<std::string> files;
  for (const auto& entry : fs::directory_iterator(out)) files.insert(entry.path().filename().string());
  CHECK(files == std::set<std::string>{"model.safetensors", "config.json", "tokenizer_config.json", "spiece.model"});
  CHECK(entries_in(dir.path / "export") == 1);  // no staging folder left beside it

  // model.safetensors: exactly the mapped tensors, F32, each the state's parameter byte for byte.
  const std::string file = read_file(out + "/model.safetensors").value();
  auto header = safetensors::parse_header(as_bytes(file), file.size());
  REQUIRE(header.is_ok());
  CHECK(header->metadata == std::map<std::string, std::string>{{"format", "pt"}});
  const auto tensors = albert_hf_tensors(config);
  REQUIRE(header->tensors.size() == tensors.size());
  for (const auto& t : tensors) {
    INFO(t.hf_name);
    const auto* info = header->find(t.hf_name);
    REQUIRE(info != nullptr);
    CHECK(info->dtype == safetensors::DType::kF32);
    CHECK(info->shape == t.shape);
    auto source = state.tensor(*state.find("param/" + t.dedloc_name));
    REQUIRE(info->bytes() == source.size() * sizeof(float));
    CHECK(std::memcmp(file.data() + header->data_offset + info->begin, source.data(), info->bytes()) == 0);
  }
  for (const auto& info : header->tensors) {  // nothing of the pooler, the SOP head, the optimizer
    CHECK(info.name.find("pooler") == std::string::npos);
    CHECK(info.name.find("sop") == std::string::npos);
    CHECK(info.name.find("decoder") == std::string::npos);  // tied: transformers' save_pretrained omits it
  }

  auto hf = nlohmann::json::parse(read_file(out + "/config.json").value());
  CHECK(hf["architectures"] == nlohmann::json::array({"AlbertForMaskedLM"}));
  CHECK(hf["model_type"] == "albert");
  CHECK(hf["vocab_size"] == 50);
  CHECK(hf["embedding_size"] == 8);
  CHECK(hf["hidden_size"] == 12);
  CHECK(hf["num_hidden_layers"] == 3);
  CHECK(hf["num_hidden_groups"] == 1);
  CHECK(hf["inner_group_num"] == 1);
  CHECK(hf["num_attention_heads"] == 3);
  CHECK(hf["intermediate_size"] == 20);
  CHECK(hf["max_position_embeddings"] == 16);
  CHECK(hf["type_vocab_size"] == 2);
  CHECK(hf["hidden_act"] == "gelu_new");
  CHECK(hf["hidden_dropout_prob"] == 0.1);
  CHECK(hf["attention_probs_dropout_prob"] == 0.1);
  CHECK(hf["layer_norm_eps"] == 1e-12);
  CHECK(hf["initializer_range"] == 0.02);
  CHECK(hf["pad_token_id"] == 0);  // [PAD], [CLS], [SEP] of train/data/token_corpus.hpp
  CHECK(hf["bos_token_id"] == 2);
  CHECK(hf["eos_token_id"] == 3);
  CHECK(hf["tie_word_embeddings"] == true);

  auto tokenizer_config = nlohmann::json::parse(read_file(out + "/tokenizer_config.json").value());
  CHECK(tokenizer_config["tokenizer_class"] == "AlbertTokenizer");
  CHECK(tokenizer_config["pad_token"] == "[PAD]");
  CHECK(tokenizer_config["do_lower_case"] == false);
  CHECK(tokenizer_config["keep_accents"] == true);
  CHECK(read_file(out + "/spiece.model").value() == read_file(tokenizer).value());
}

TEST_CASE("model.safetensors (bare parameter names) exports the same folder as the training state", "[unit][hf]") {
  test::ScopedTempDir dir{"dedloc-hf"};
  const auto config = small_config();
  const std::string tokenizer = write_tokenizer(dir.path);
  const std::string from_state = (dir.path / "a").string(), from_model = (dir.path / "b").string();
  REQUIRE(write_albert_hf_folder(test::albert_state(config, "param/", 3), tokenizer, from_state).is_ok());
  REQUIRE(write_albert_hf_folder(test::albert_state(config, "", 3), tokenizer, from_model).is_ok());
  CHECK(read_file(from_state + "/model.safetensors").value() == read_file(from_model + "/model.safetensors").value());
}

TEST_CASE("A second export replaces the folder whole, and abandoned staging folders go", "[unit][hf]") {
  test::ScopedTempDir dir{"dedloc-hf"};
  const auto config = small_config();
  const std::string tokenizer = write_tokenizer(dir.path);
  const std::string out = (dir.path / "hf").string();
  REQUIRE(write_albert_hf_folder(test::albert_state(config, "param/", 0), tokenizer, out).is_ok());
  const std::string first = read_file(out + "/model.safetensors").value();
  REQUIRE(write_file_atomically(out + "/stale.txt", "from an older export").is_ok());
  // A staging folder whose writer was killed (no process has that id: Linux's pid_max is at most 2^22).
  fs::create_directories(dir.path / "hf.tmp.999999999.0");
  REQUIRE(write_file_atomically((dir.path / "hf.tmp.999999999.0" / "model.safetensors").string(), "partial").is_ok());

  REQUIRE(write_albert_hf_folder(test::albert_state(config, "param/", 5), tokenizer, out + "/").is_ok());  // same folder
  CHECK_FALSE(fs::exists(out + "/stale.txt"));
  CHECK(read_file(out + "/model.safetensors").value() != first);
  CHECK(entries_in(out) == 4);
  std::set<std::string> beside;
  for (const auto& entry : fs::directory_iterator(dir.path)) beside.insert(entry.path().filename().string());
  CHECK(beside == std::set<std::string>{"hf", fs::path(tokenizer).filename().string()});
}

TEST_CASE("Each bad input fails with one line naming what is wrong, and nothing is written", "[unit][hf]") {
  test::ScopedTempDir dir{"dedloc-hf"};
  const auto config = small_config();
  const std::string tokenizer = write_tokenizer(dir.path);
  const std::string out = (dir.path / "hf").string();

  SECTION("a state of another model names the first ALBERT tensor it lacks") {
    auto mlp = avg::TrainingState::with_tensors({{"param/fc1.weight", {4, 3}}, {"param/fc1.bias", {4}}});
    REQUIRE(mlp.is_ok());
    auto status = write_albert_hf_folder(*mlp, tokenizer, out);
    check_one_line(status);
    CHECK(status.code() == Code::kInvalidArgument);
    CHECK(status.message() == "not an ALBERT state: it has no tensor 'param/embeddings.word_embeddings.weight'");
  }
  SECTION("a state without one ALBERT tensor names that one") {
    auto state = test::albert_state(config);
    std::vector<avg::TensorSpec> specs;
    for (const auto& spec : state.tensors()) {
      if (spec.name != "param/encoder.layer.ffn_output.bias") specs.push_back(spec);
    }
    auto lacking = avg::TrainingState::with_tensors(specs, state.metadata);
    REQUIRE(lacking.is_ok());
    auto status = write_albert_hf_folder(*lacking, tokenizer, out);
    check_one_line(status);
    CHECK(status.message().find("'param/encoder.layer.ffn_output.bias'") != std::string::npos);
  }
  SECTION("a state without the config entry") {
    auto state = test::albert_state(config);
    state.metadata.entries.clear();
    auto status = write_albert_hf_folder(state, tokenizer, out);
    check_one_line(status);
    CHECK(status.code() == Code::kNotFound);
    CHECK(status.message().find("no 'albert_config' entry") != std::string::npos);
  }
  SECTION("a config entry that does not parse") {
    auto state = test::albert_state(config);
    state.metadata.entries[std::string(kAlbertConfigEntry)] = std::string("{\"vocab_size\": 50}");
    auto status = write_albert_hf_folder(state, tokenizer, out);
    check_one_line(status);
    CHECK(status.code() == Code::kMalformed);
    CHECK(status.message().find("albert_config: '") != std::string::npos);
  }
  SECTION("a parameter whose shape the config contradicts") {
    auto state = test::albert_state(config);
    auto other = config;
    other.intermediate_size = 24;
    state.metadata.entries[std::string(kAlbertConfigEntry)] = albert_config_json(other);
    auto status = write_albert_hf_folder(state, tokenizer, out);
    check_one_line(status);
    CHECK(status.code() == Code::kMalformed);
    CHECK(status.message() ==
          "tensor 'param/encoder.layer.ffn.weight' has shape [20, 12], the state's albert_config says [24, 12]");
  }
  SECTION("a missing tokenizer file") {
    const std::string missing = (dir.path / "no-such.model").string();
    auto status = write_albert_hf_folder(test::albert_state(config), missing, out);
    check_one_line(status);
    CHECK(status.code() == Code::kNotFound);
    CHECK(status.message() == "tokenizer file missing: " + missing);
  }
  SECTION("an empty tokenizer file") {
    auto status = write_albert_hf_folder(test::albert_state(config), write_tokenizer(dir.path, ""), out);
    check_one_line(status);
    CHECK(status.code() == Code::kMalformed);
  }
  SECTION("a destination that is a file, or a folder that is not an export, is never replaced") {
    REQUIRE(write_file_atomically(out, "a file").is_ok());
    auto status = write_albert_hf_folder(test::albert_state(config), tokenizer, out);
    check_one_line(status);
    CHECK(status.code() == Code::kRefused);
    CHECK(read_file(out).value() == "a file");
    fs::remove(out);
    fs::create_directories(out);
    REQUIRE(write_file_atomically(out + "/thesis.tex", "years of work").is_ok());
    status = write_albert_hf_folder(test::albert_state(config), tokenizer, out);
    check_one_line(status);
    CHECK(status.code() == Code::kRefused);
    CHECK(status.message().find("not an export") != std::string::npos);
    CHECK(read_file(out + "/thesis.tex").value() == "years of work");
    fs::remove_all(out);
  }
  CHECK_FALSE(fs::exists(out));
  CHECK(entries_in(dir.path) <= 2);  // the tokenizer files only: no staging folder left
}
