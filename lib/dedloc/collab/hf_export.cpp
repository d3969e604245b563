#include "dedloc/collab/hf_export.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "dedloc/core/files.hpp"
#include "dedloc/core/safetensors.hpp"

namespace dedloc::collab {

namespace fs = std::filesystem;

namespace {

// The special tokens' ids, fixed for every dedloc tokenizer (train/data/token_corpus.hpp SpecialTokens,
// train/data/tokenizer.hpp); transformers' AlbertConfig defaults happen to be the same.
constexpr int kPadId = 0, kClsId = 2, kSepId = 3;

// The tokenizer file is read whole; SentencePiece models are a few MB at most.
constexpr size_t kMaxTokenizerBytes = size_t{256} << 20;

const char* const kIntegerFields[] = {"vocab_size",        "embedding_size",          "hidden_size",
                                      "num_hidden_layers", "num_attention_heads",     "intermediate_size",
                                      "max_position_embeddings", "type_vocab_size"};
const char* const kNumberFields[] = {"hidden_dropout_prob", "attention_probs_dropout_prob", "layer_norm_eps",
                                     "initializer_range"};
constexpr const char* kActivationField = "hidden_act";

std::int64_t* integer_field(AlbertHfConfig& c, std::string_view name) {
  if (name == "vocab_size") return &c.vocab_size;
  if (name == "embedding_size") return &c.embedding_size;
  if (name == "hidden_size") return &c.hidden_size;
  if (name == "num_hidden_layers") return &c.num_hidden_layers;
  if (name == "num_attention_heads") return &c.num_attention_heads;
  if (name == "intermediate_size") return &c.intermediate_size;
  if (name == "max_position_embeddings") return &c.max_position_embeddings;
  if (name == "type_vocab_size") return &c.type_vocab_size;
  return nullptr;
}

double* number_field(AlbertHfConfig& c, std::string_view name) {
  if (name == "hidden_dropout_prob") return &c.hidden_dropout_prob;
  if (name == "attention_probs_dropout_prob") return &c.attention_probs_dropout_prob;
  if (name == "layer_norm_eps") return &c.layer_norm_eps;
  if (name == "initializer_range") return &c.initializer_range;
  return nullptr;
}

nlohmann::json shape_fields(const AlbertHfConfig& c) {
  return {{"vocab_size", c.vocab_size},
          {"embedding_size", c.embedding_size},
          {"hidden_size", c.hidden_size},
          {"num_hidden_layers", c.num_hidden_layers},
          {"num_attention_heads", c.num_attention_heads},
          {"intermediate_size", c.intermediate_size},
          {"max_position_embeddings", c.max_position_embeddings},
          {"type_vocab_size", c.type_vocab_size},
          {"hidden_dropout_prob", c.hidden_dropout_prob},
          {"attention_probs_dropout_prob", c.attention_probs_dropout_prob},
          {"layer_norm_eps", c.layer_norm_eps},
          {"initializer_range", c.initializer_range},
          {"hidden_act", c.hidden_act}};
}

Status check_config(const AlbertHfConfig& c) {
  auto bad = [](const std::string& why) { return error(Code::kMalformed, "albert_config: " + why); };
  AlbertHfConfig copy = c;  // integer_field() hands out pointers into a config it may change
  for (const char* name : kIntegerFields) {
    std::int64_t value = *integer_field(copy, name);
    if (value < 1) return bad(std::string(name) + " is " + std::to_string(value) + ", must be at least 1");
  }
  if (c.hidden_size % c.num_attention_heads != 0) {
    return bad("hidden_size " + std::to_string(c.hidden_size) + " is not divisible by num_attention_heads " +
               std::to_string(c.num_attention_heads));
  }
  if (!(c.layer_norm_eps > 0)) return bad("layer_norm_eps must be above 0");
  for (double p : {c.hidden_dropout_prob, c.attention_probs_dropout_prob}) {
    if (!(p >= 0 && p < 1)) return bad("a dropout probability " + std::to_string(p) + " is outside [0, 1)");
  }
  if (c.hidden_act.empty()) return bad("hidden_act is empty");
  return Status::ok();
}

std::string dump(const nlohmann::json& json) {
  return json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// "param/" for a training state or checkpoint.safetensors, "" for model.safetensors (bare model names).
std::string parameter_prefix(const avg::TrainingState& state) {
  for (const auto& tensor : state.tensors()) {
    if (tensor.name.rfind("param/", 0) == 0) return "param/";
  }
  return "";
}

// A folder at `dir` that an export may replace: none, an empty one, or an earlier export.
Status check_replaceable(const std::string& dir) {
  std::error_code ec;
  auto status = fs::symlink_status(dir, ec);
  if (!fs::exists(status)) return Status::ok();
  if (!fs::is_directory(status)) return error(Code::kRefused, dir + " exists and is not a folder: not replaced");
  if (fs::exists(fs::path(dir) / "config.json", ec) || fs::is_empty(dir, ec)) return Status::ok();
  return error(Code::kRefused, dir + " is a folder that holds no config.json (not an export): not replaced");
}

// Staging folders ("<name>.tmp.<pid>.<n>") beside `dir` whose writer is gone (killed mid-export).
void remove_abandoned_staging(const fs::path& dir) {
  std::error_code ec;
  const std::string stem = dir.filename().string() + ".tmp.";
  for (const auto& entry : fs::directory_iterator(dir.parent_path().empty() ? "." : dir.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(stem, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + stem.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) fs::remove_all(entry.path(), ec);
  }
}

}  // namespace

std::string albert_config_json(const AlbertHfConfig& config) { return shape_fields(config).dump(); }

Result<AlbertHfConfig> parse_albert_config(std::string_view text) {
  auto bad = [](const std::string& why) { return error(Code::kMalformed, "albert_config: " + why); };
  auto json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_discarded() || !json.is_object()) return bad("not a JSON object");
  AlbertHfConfig config;
  for (const auto& [key, value] : json.items()) {
    if (std::int64_t* field = integer_field(config, key)) {
      if (!value.is_number_integer()) return bad("'" + key + "' is not an integer");
      *field = value.get<std::int64_t>();
    } else if (double* number = number_field(config, key)) {
      if (!value.is_number()) return bad("'" + key + "' is not a number");
      *number = value.get<double>();
    } else if (key == kActivationField) {
      if (!value.is_string()) return bad("'hidden_act' is not a string");
      config.hidden_act = value.get<std::string>();
    } else {
      return bad("unknown field '" + key + "'");
    }
  }
  for (const char* name : kIntegerFields) {
    if (!json.contains(name)) return bad("'" + std::string(name) + "' is missing");
  }
  for (const char* name : kNumberFields) {
    if (!json.contains(name)) return bad("'" + std::string(name) + "' is missing");
  }
  if (!json.contains(kActivationField)) return bad("'hidden_act' is missing");
  DEDLOC_RETURN_IF_ERROR(check_config(config));
  return config;
}

Result<AlbertHfConfig> albert_config_of(const avg::TrainingState& state) {
  auto it = state.metadata.entries.find(kAlbertConfigEntry);
  if (it == state.metadata.entries.end()) {
    return error(Code::kNotFound, "the state has no '" + std::string(kAlbertConfigEntry) +
                                      "' entry (the model's shape, which dedloc-train publishes for ALBERT runs)");
  }
  const auto* text = std::get_if<std::string>(&it->second);
  if (text == nullptr) return error(Code::kMalformed, "the state's '" + std::string(kAlbertConfigEntry) + "' entry is a number");
  return parse_albert_config(*text);
}

std::vector<HfTensor> albert_hf_tensors(const AlbertHfConfig& c) {
  using Shape = std::vector<std::uint64_t>;
  const auto V = static_cast<std::uint64_t>(c.vocab_size), E = static_cast<std::uint64_t>(c.embedding_size),
             H = static_cast<std::uint64_t>(c.hidden_size), I = static_cast<std::uint64_t>(c.intermediate_size),
             P = static_cast<std::uint64_t>(c.max_position_embeddings),
             T = static_cast<std::uint64_t>(c.type_vocab_size);
  std::vector<HfTensor> out;
  auto add = [&](std::string hf, std::string dedloc, Shape shape) {
    out.push_back({std::move(hf), std::move(dedloc), std::move(shape)});
  };
  auto linear = [&](const std::string& hf, const std::string& dedloc, std::uint64_t in, std::uint64_t outs) {
    add(hf + ".weight", dedloc + ".weight", {outs, in});  // torch.nn.Linear: [out, in]
    add(hf + ".bias", dedloc + ".bias", {outs});
  };
  auto layer_norm = [&](const std::string& hf, const std::string& dedloc, std::uint64_t size) {
    add(hf + ".weight", dedloc + ".weight", {size});
    add(hf + ".bias", dedloc + ".bias", {size});
  };

  add("albert.embeddings.word_embeddings.weight", "embeddings.word_embeddings.weight", {V, E});
  add("albert.embeddings.position_embeddings.weight", "embeddings.position_embeddings.weight", {P, E});
  add("albert.embeddings.token_type_embeddings.weight", "embeddings.token_type_embeddings.weight", {T, E});
  layer_norm("albert.embeddings.LayerNorm", "embeddings.LayerNorm", E);
  linear("albert.encoder.embedding_hidden_mapping_in", "encoder.embedding_hidden_mapping_in", E, H);
  // dedloc's one shared layer is transformers' group 0, inner layer 0 (num_hidden_groups = inner_group_num = 1).
  const std::string layer = "albert.encoder.albert_layer_groups.0.albert_layers.0";
  for (const char* projection : {"query", "key", "value", "dense"}) {
    linear(layer + ".attention." + projection, std::string("encoder.layer.attention.") + projection, H, H);
  }
  layer_norm(layer + ".attention.LayerNorm", "encoder.layer.attention.LayerNorm", H);
  linear(layer + ".ffn", "encoder.layer.ffn", H, I);
  linear(layer + ".ffn_output", "encoder.layer.ffn_output", I, H);
  layer_norm(layer + ".full_layer_layer_norm", "encoder.layer.full_layer_layer_norm", H);
  linear("predictions.dense", "predictions.dense", H, E);
  layer_norm("predictions.LayerNorm", "predictions.LayerNorm", E);
  add("predictions.bias", "predictions.bias", {V});
  return out;
}

std::string hf_config_json(const AlbertHfConfig& c) {
  nlohmann::json json = {{"architectures", {"AlbertForMaskedLM"}}, {"model_type", "albert"}};
  json.update(shape_fields(c));
  json.update(nlohmann::json{{"num_hidden_groups", 1},
                             {"inner_group_num", 1},
                             {"position_embedding_type", "absolute"},
                             {"tie_word_embeddings", true},
                             {"pad_token_id", kPadId},
                             {"bos_token_id", kClsId},
                             {"eos_token_id", kSepId},
                             {"torch_dtype", "float32"}});
  return dump(json);
}

std::string hf_tokenizer_config_json(const AlbertHfConfig& c) {
  // The pieces of train/data/tokenizer.hpp. dedloc feeds SentencePiece the text as it is (whitespace
  // collapsed), so AlbertTokenizer must not lowercase or strip accents first.
  nlohmann::json json = {{"tokenizer_class", "AlbertTokenizer"},
                         {"do_lower_case", false},
                         {"remove_space", true},
                         {"keep_accents", true},
                         {"pad_token", "[PAD]"},
                         {"unk_token", "<unk>"},
                         {"cls_token", "[CLS]"},
                         {"sep_token", "[SEP]"},
                         {"mask_token", "[MASK]"},
                         {"bos_token", "[CLS]"},
                         {"eos_token", "[SEP]"},
                         {"model_max_length", c.max_position_embeddings}};
  return dump(json);
}

Status write_albert_hf_folder(const avg::TrainingState& state, const std::string& tokenizer_model,
                              const std::string& dir) {
  // Names first: a state of another model has neither the tensors nor the config, and the missing tensor
  // says more than the missing entry.
  const std::string prefix = parameter_prefix(state);
  auto config = albert_config_of(state);
  const auto tensors = albert_hf_tensors(config ? *config : AlbertHfConfig{});
  std::vector<size_t> index;
  for (const auto& tensor : tensors) {
    auto found = state.find(prefix + tensor.dedloc_name);
    if (!found) {
      return error(Code::kInvalidArgument, "not an ALBERT state: it has no tensor '" + prefix + tensor.dedloc_name + "'");
    }
    index.push_back(*found);
  }
  if (!config) return config.status();
  std::vector<safetensors::TensorBytes> weights;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const auto& have = state.tensors()[index[k]];
    if (have.shape != tensors[k].shape) {
      return error(Code::kMalformed, "tensor '" + have.name + "' has shape " + shape_text(have.shape) +
                                         ", the state's albert_config says " + shape_text(tensors[k].shape));
    }
    auto values = state.tensor(index[k]);
    weights.push_back({tensors[k].hf_name, safetensors::DType::kF32, tensors[k].shape,
                       ByteSpan(reinterpret_cast<const std::uint8_t*>(values.data()), values.size() * sizeof(float))});
  }

  std::error_code ec;
  if (!fs::exists(tokenizer_model, ec)) return error(Code::kNotFound, "tokenizer file missing: " + tokenizer_model);
  auto spiece = read_file(tokenizer_model, kMaxTokenizerBytes);
  if (!spiece) return spiece.status().with_context("reading the tokenizer");
  if (spiece->empty()) return error(Code::kMalformed, "tokenizer file " + tokenizer_model + " is empty");
  // "models/albert/" names the folder "models/albert": its staging sibling must not land inside it.
  fs::path target = fs::path(dir).lexically_normal();
  if (!target.has_filename()) target = target.parent_path();
  if (target.empty() || target == "." || target == "/" || target.filename() == "..") {
    return error(Code::kInvalidArgument, "'" + dir + "' cannot be the Hugging Face folder");
  }
  DEDLOC_RETURN_IF_ERROR(check_replaceable(target.string()));

  auto encoded = safetensors::encode(weights, {{"format", "pt"}});
  if (!encoded) return encoded.status().with_context("encoding model.safetensors");

  if (!target.parent_path().empty()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec) return error(Code::kIo, "cannot create " + target.parent_path().string() + ": " + ec.message());
  }
  remove_abandoned_staging(target);
  static std::atomic<unsigned> serial{0};
  const std::string staged = target.string() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(serial++);
  fs::remove_all(staged, ec);
  fs::create_directory(staged, ec);
  if (ec) return error(Code::kIo, "cannot create " + staged + ": " + ec.message());
  auto written = [&]() -> Status {
    DEDLOC_RETURN_IF_ERROR(write_file_atomically(staged + "/model.safetensors", *encoded));
    DEDLOC_RETURN_IF_ERROR(write_file_atomically(staged + "/config.json", hf_config_json(*config)));
    DEDLOC_RETURN_IF_ERROR(write_file_atomically(staged + "/tokenizer_config.json", hf_tokenizer_config_json(*config)));
    DEDLOC_RETURN_IF_ERROR(write_file_atomically(staged + "/spiece.model", *spiece));
    return replace_directory(staged, target.string());
  }();
  if (!written.is_ok()) fs::remove_all(staged, ec);
  return written.with_context("writing the Hugging Face folder " + target.string());
}

}  // namespace dedloc::collab
