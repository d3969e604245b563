// `dedloc-avg export --from FILE --format hf` as operators run it, offline: the real binary converts a
// checkpoint on disk (written here as dedloc-train writes one) into a Hugging Face folder, and refuses bad
// flags and bad inputs with one line each and the documented exit codes (docs/operators.md).
#include <catch2/catch.hpp>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "dedloc/collab/checkpoint.hpp"
#include "dedloc/collab/hf_export.hpp"
#include "dedloc/core/files.hpp"
#include "dedloc/core/safetensors.hpp"
#include "support/albert_state.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;
namespace fs = std::filesystem;

namespace {

collab::AlbertHfConfig tiny_config() {
  collab::AlbertHfConfig c;
  c.vocab_size = 30;
  c.embedding_size = 4;
  c.hidden_size = 8;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 16;
  c.max_position_embeddings = 12;
  c.type_vocab_size = 2;
  c.layer_norm_eps = 1e-12;
  c.initializer_range = 0.02;
  c.hidden_act = "gelu_new";
  return c;
}

// checkpoint.safetensors as dedloc-train writes it for ALBERT: parameters, the pooler and the SOP head,
// optimizer statistics, the epoch and the config entry.
void write_albert_checkpoint(const std::string& path, std::uint64_t epoch) {
  REQUIRE(collab::save_checkpoint(path, test::albert_state(tiny_config(), "param/", 0, epoch), {{"run_id", "albert-run"}}).is_ok());
}

std::string avg_tool() { return test::binary_path("tools/dedloc-avg/dedloc-avg"); }

}  // namespace

TEST_CASE("dedloc-avg export --from converts a checkpoint into a Hugging Face folder", "[proc][hf]") {
  test::ScopedTempDir dir{"dedloc-hf-cli"};
  const std::string checkpoint = (dir.path / "checkpoint.safetensors").string();
  write_albert_checkpoint(checkpoint, 42);
  const std::string tokenizer = (dir.path / "albert-spm-30-0000000000000001.model").string();
  REQUIRE(write_file_atomically(tokenizer, std::string("\x0a\x05[PAD]", 7)).is_ok());
  const std::string out = (dir.path / "models" / "albert").string();

  auto run = test::run_command(avg_tool() + " export --from " + checkpoint + " --format hf --tokenizer " + tokenizer +
                               " --out " + out);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output == "exported epoch 42: " + out + " (Hugging Face folder from " + checkpoint + ")\n");

  const std::string file = read_file(out + "/model.safetensors").value();
  auto header = safetensors::parse_header(as_bytes(file), file.size());
  REQUIRE(header.is_ok());
  CHECK(header->metadata.at("format") == "pt");
  CHECK(header->tensors.size() == 28);
  CHECK(header->find("albert.encoder.albert_layer_groups.0.albert_layers.0.attention.query.weight") != nullptr);
  CHECK(header->find("predictions.bias") != nullptr);
  auto config = nlohmann::json::parse(read_file(out + "/config.json").value());
  CHECK(config["architectures"][0] == "AlbertForMaskedLM");
  CHECK(config["num_hidden_layers"] == 2);
  CHECK(read_file(out + "/spiece.model").value() == read_file(tokenizer).value());

  // Again with --json, over the first export: replaced whole.
  write_albert_checkpoint(checkpoint, 43);
  auto again = test::run_command(avg_tool() + " --json export --from " + checkpoint + " --format hf --tokenizer " +
                                 tokenizer + " --out " + out);
  INFO(again.output);
  REQUIRE(again.exit_code == 0);
  auto json = nlohmann::json::parse(again.output);
  CHECK(json["path"] == out);
  CHECK(json["epoch"] == 43);
  CHECK(json["from"] == checkpoint);
  CHECK(std::distance(fs::directory_iterator(dir.path / "models"), fs::directory_iterator()) == 1);
}

TEST_CASE("dedloc-avg export --format hf refuses bad flags and bad inputs with one line each", "[proc][hf]") {
  test::ScopedTempDir dir{"dedloc-hf-cli"};
  const std::string checkpoint = (dir.path / "checkpoint.safetensors").string();
  write_albert_checkpoint(checkpoint, 7);
  const std::string tokenizer = (dir.path / "spm.model").string();
  REQUIRE(write_file_atomically(tokenizer, "spm").is_ok());
  const std::string out = (dir.path / "hf").string();
  auto export_with = [&](const std::string& flags) {
    return test::run_command(avg_tool() + " export " + flags + " --out " + out);
  };
  auto one_line = [](const test::CommandOutput& run, int exit_code, const std::string& message) {
    INFO(run.output);
    CHECK(run.exit_code == exit_code);
    CHECK(run.output == "dedloc-avg export: error: " + message + "\n");
  };

  one_line(export_with("--from " + checkpoint + " --format hf"), 2,
           "invalid_argument: --format hf needs --tokenizer (the run's SentencePiece model)");
  one_line(export_with("--from " + checkpoint + " --tokenizer " + tokenizer), 2,
           "invalid_argument: --tokenizer applies to --format hf only");
  one_line(export_with("--from " + checkpoint), 2, "invalid_argument: --from converts a checkpoint into --format hf only");
  one_line(export_with("--format hf --tokenizer " + tokenizer), 2, "invalid_argument: --run is required (or --from FILE)");
  one_line(export_with("--from " + checkpoint + " --format hf --tokenizer " + dir.path.string() + "/none.model"), 1,
           "not_found: converting " + checkpoint + ": tokenizer file missing: " + dir.path.string() + "/none.model");
  one_line(export_with("--from " + dir.path.string() + "/none.safetensors --format hf --tokenizer " + tokenizer), 1,
           "not_found: no checkpoint at " + dir.path.string() + "/none.safetensors");

  // A checkpoint of another model (the MLP recipe's names).
  auto mlp = avg::TrainingState::with_tensors({{"param/net.0.weight", {4, 3}}, {"optim/net.0.weight.momentum", {4, 3}}});
  REQUIRE(mlp.is_ok());
  const std::string mlp_checkpoint = (dir.path / "mlp.safetensors").string();
  REQUIRE(collab::save_checkpoint(mlp_checkpoint, *mlp).is_ok());
  one_line(export_with("--from " + mlp_checkpoint + " --format hf --tokenizer " + tokenizer), 2,
           "invalid_argument: converting " + mlp_checkpoint +
               ": not an ALBERT state: it has no tensor 'param/embeddings.word_embeddings.weight'");

  // --from is offline: the network's flags are refused with it (CLI11's own usage line).
  auto both = export_with("--from " + checkpoint + " --format hf --tokenizer " + tokenizer + " --run x");
  CHECK(both.exit_code == 2);
  CHECK(both.output.find("--run excludes --from") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
}
