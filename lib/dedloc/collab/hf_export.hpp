// dedloc's ALBERT as a Hugging Face model folder, written without torch: what `dedloc-avg export --format hf`
// and dedloc-train (at the end of an ALBERT run) write, so that transformers loads the collaboration's model
// with AlbertForMaskedLM.from_pretrained(dir) and AlbertTokenizer.from_pretrained(dir) (docs/operators.md).
//
// The folder holds
//   model.safetensors      the weights of transformers' AlbertForMaskedLM, F32, metadata {"format": "pt"}:
//                          the encoder under "albert." (the one shared layer as
//                          albert.encoder.albert_layer_groups.0.albert_layers.0.*) and the masked-LM head
//                          "predictions.*". Left out, as transformers' save_pretrained leaves them out:
//                          predictions.decoder.{weight,bias}, tied to the word embeddings and to
//                          predictions.bias (from_pretrained ties them again), and the pooler and the
//                          sentence-order head, which AlbertForMaskedLM does not have. Optimizer statistics
//                          and buffers are not the model's.
//   config.json            transformers' AlbertConfig: the shape, one group of one layer, "gelu_new" (the
//                          tanh-approximated GELU that train/models/albert.cpp uses), dedloc's special ids
//   tokenizer_config.json  AlbertTokenizer's settings for dedloc's SentencePiece model: [PAD] as padding (the
//                          class's default "<pad>" is no piece of it), no lowercasing, accents kept
//   spiece.model           the run's SentencePiece model, copied (train/data/tokenizer.hpp)
//
// Where the shape comes from: the training state carries it. AlbertTask publishes it as JSON in the metadata
// entry kAlbertConfigEntry (train/task.hpp Task::state_entries), so it travels with every download and
// checkpoint and a tool without torch can write config.json. Parameters are read under "param/<name>" (a
// training state, checkpoint.safetensors) or under their bare model names (model.safetensors), the names
// of train/models/albert.hpp.
//
// The folder is built in a temporary sibling ("<dir>.tmp.<pid>.<n>") and renamed into place; an existing
// export at `dir` is swapped out whole (never left half-written), and anything else there is refused.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dedloc/avg/training_state.hpp"
#include "dedloc/core/status.hpp"

namespace dedloc::collab {

// The metadata entry of a training state that holds an ALBERT run's shape (albert_config_json).
inline constexpr std::string_view kAlbertConfigEntry = "albert_config";

// The shape and settings of an ALBERT model, under transformers' AlbertConfig names.
struct AlbertHfConfig {
  std::int64_t vocab_size = 0;               // pieces of the tokenizer, specials included
  std::int64_t embedding_size = 0;           // E
  std::int64_t hidden_size = 0;              // H
  std::int64_t num_hidden_layers = 0;        // applications of the shared layer
  std::int64_t num_attention_heads = 0;      // divides H
  std::int64_t intermediate_size = 0;        // the feed-forward width
  std::int64_t max_position_embeddings = 0;  // dedloc's max_length
  std::int64_t type_vocab_size = 0;          // segments
  double hidden_dropout_prob = 0;
  double attention_probs_dropout_prob = 0;
  double layer_norm_eps = 0;
  double initializer_range = 0;
  std::string hidden_act;                    // transformers' ACT2FN name: "gelu_new" for dedloc's GELU

  bool operator==(const AlbertHfConfig&) const = default;
};

// The JSON of kAlbertConfigEntry: an object with exactly the fields above, under their names.
std::string albert_config_json(const AlbertHfConfig& config);
// kMalformed naming the field: not JSON, a field missing, unknown or of the wrong type, or a shape that
// cannot be (a size below 1, H not divisible by the heads, an epsilon not above 0, a dropout outside [0, 1)).
Result<AlbertHfConfig> parse_albert_config(std::string_view json);
// The state's kAlbertConfigEntry, parsed. kNotFound when the state has no such entry.
Result<AlbertHfConfig> albert_config_of(const avg::TrainingState& state);

// One tensor of the exported file.
struct HfTensor {
  std::string hf_name;                // transformers' AlbertForMaskedLM name
  std::string dedloc_name;            // train/models/albert.hpp's name (a state holds it as "param/" + this)
  std::vector<std::uint64_t> shape;   // as config says it must be
};

// Every tensor model.safetensors holds for `config`, in the file's order. The names do not depend on the
// shape (dedloc's ALBERT always has one group of one layer).
std::vector<HfTensor> albert_hf_tensors(const AlbertHfConfig& config);

// The contents of config.json and tokenizer_config.json for `config`.
std::string hf_config_json(const AlbertHfConfig& config);
std::string hf_tokenizer_config_json(const AlbertHfConfig& config);

// Writes the folder `dir` from the ALBERT parameters of `state` and the SentencePiece model file
// `tokenizer_model`. Errors, one line each:
//   kInvalidArgument  the state is not ALBERT (naming the first missing tensor)
//   kNotFound         no kAlbertConfigEntry in the state; the tokenizer file is missing (naming it)
//   kMalformed        the config entry does not parse; a parameter whose shape is not what the config says
//                     (naming both); the tokenizer file is empty
//   kRefused          `dir` exists and is not an export (a file, or a folder without config.json that is
//                     not empty): never replaced
//   kIo               the folder cannot be written
Status write_albert_hf_folder(const avg::TrainingState& state, const std::string& tokenizer_model,
                              const std::string& dir);

}  // namespace dedloc::collab
