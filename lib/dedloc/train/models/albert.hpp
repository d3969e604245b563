// ALBERT (Lan et al. 2019, "ALBERT: A Lite BERT"): the model DeDLOC pretrains collaboratively.
//
// Two ideas make it small enough to average over home connections:
//   factorized embeddings   tokens are embedded in E dimensions (E << H) and projected to the hidden size H
//                           once: V*E + E*H parameters instead of V*H;
//   cross-layer sharing     one transformer layer is applied `num_layers` times, so depth costs compute
//                           but no parameters (ALBERT-base: 12 M parameters against BERT-base's 108 M).
// The layer is BERT's post-LayerNorm block with ALBERT's tanh-approximated GELU ("gelu_new"). Pretraining
// has two heads: masked-LM, whose output projection is tied to the input embedding (so it is not a
// parameter of its own), and sentence-order prediction (SOP) on the pooled [CLS] state.
//
// Parameter names follow Hugging Face's AlbertModel where it has one name per tensor (the shared layer is
// "encoder.layer", not "encoder.albert_layer_groups.0.albert_layers.0"):
//   embeddings.{word_embeddings,position_embeddings,token_type_embeddings}.weight, embeddings.LayerNorm.*
//   encoder.embedding_hidden_mapping_in.*
//   encoder.layer.attention.{query,key,value,dense,LayerNorm}.*
//   encoder.layer.{ffn,ffn_output,full_layer_layer_norm}.*
//   pooler.*   predictions.{dense,LayerNorm}.*, predictions.bias   sop_classifier.classifier.*
// Every normalization weight's name contains "LayerNorm" or "norm" and every bias ends in "bias", which is
// what Task::decays() keys on.
#pragma once

#include <cstdint>
#include <string_view>

#include <torch/torch.h>

#include "dedloc/core/status.hpp"

namespace dedloc::train {

struct AlbertConfig {
  std::int64_t vocab_size = 8000;
  std::int64_t embedding_size = 128;     // E: the factorized embedding width
  std::int64_t hidden_size = 256;        // H
  std::int64_t num_layers = 4;           // applications of the one shared layer
  std::int64_t num_heads = 4;            // must divide H
  std::int64_t intermediate_size = 1024; // the feed-forward width
  std::int64_t max_length = 128;         // positions: the longest sequence, [CLS] and [SEP]s included
  std::int64_t type_vocab_size = 2;      // segments A and B
  double dropout = 0.0;                  // hidden and attention dropout; ALBERT v2 trains without (paper §4.10)
  double layer_norm_eps = 1e-12;
  double init_std = 0.02;                // weights ~ N(0, init_std); biases 0, LayerNorm weights 1
};

// The named shapes: "tiny" (H256 E128 4 layers, trains on a CPU in minutes), "albert-base" (H768 E128
// 12 layers 12 heads, 3072, 512 positions, 30000 pieces) and "albert-large" (H1024 E128 24 layers
// 16 heads, 4096). kInvalidArgument naming the shapes for any other name.
Result<AlbertConfig> albert_shape(std::string_view name);
// kInvalidArgument naming the first impossible field (H not divisible by heads, sizes < 1, ...).
Status validate_albert_config(const AlbertConfig& config);
// The number of trainable parameters, computed from the shape (no allocation).
std::int64_t albert_parameter_count(const AlbertConfig& config);

class AlbertEmbeddingsImpl : public torch::nn::Module {
 public:
  explicit AlbertEmbeddingsImpl(const AlbertConfig& config);
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids);

  torch::nn::Embedding word_embeddings{nullptr}, position_embeddings{nullptr}, token_type_embeddings{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};  // NOLINT: the name is the parameter name
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(AlbertEmbeddings);

class AlbertAttentionImpl : public torch::nn::Module {
 public:
  explicit AlbertAttentionImpl(const AlbertConfig& config);
  // hidden [B, T, H]; mask_bias [B, 1, 1, T]: 0 for real tokens, a large negative number for padding.
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& mask_bias);

  std::int64_t num_heads;
  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr}, dense{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};  // NOLINT
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(AlbertAttention);

// The one transformer layer that every depth shares.
class AlbertLayerImpl : public torch::nn::Module {
 public:
  explicit AlbertLayerImpl(const AlbertConfig& config);
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& mask_bias);

  AlbertAttention attention{nullptr};
  torch::nn::Linear ffn{nullptr}, ffn_output{nullptr};
  torch::nn::LayerNorm full_layer_layer_norm{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(AlbertLayer);

class AlbertEncoderImpl : public torch::nn::Module {
 public:
  explicit AlbertEncoderImpl(const AlbertConfig& config);
  // embedded [B, T, E] -> [B, T, H]
  torch::Tensor forward(const torch::Tensor& embedded, const torch::Tensor& mask_bias);

  std::int64_t num_layers;
  torch::nn::Linear embedding_hidden_mapping_in{nullptr};
  AlbertLayer layer{nullptr};
};
TORCH_MODULE(AlbertEncoder);

// Masked-LM head: H -> E, GELU, LayerNorm, then the transposed word embedding (tied) plus a bias.
class AlbertMLMHeadImpl : public torch::nn::Module {
 public:
  explicit AlbertMLMHeadImpl(const AlbertConfig& config);
  // hidden [N, H], word_embeddings [V, E] -> logits [N, V]
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& word_embeddings);

  torch::nn::Linear dense{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};  // NOLINT
  torch::Tensor bias;
};
TORCH_MODULE(AlbertMLMHead);

class AlbertSOPHeadImpl : public torch::nn::Module {
 public:
  explicit AlbertSOPHeadImpl(const AlbertConfig& config);
  torch::Tensor forward(const torch::Tensor& pooled);  // [B, H] -> [B, 2]

  torch::nn::Dropout dropout{nullptr};
  torch::nn::Linear classifier{nullptr};
};
TORCH_MODULE(AlbertSOPHead);

// The pretraining losses of one batch. `total` (= mlm + sop, as in the paper) is what backward() follows;
// the rest is detached, for logs.
struct AlbertLosses {
  torch::Tensor total;
  torch::Tensor mlm;             // mean cross-entropy over the masked positions
  torch::Tensor sop;             // mean cross-entropy of the sentence-order labels
  double mlm_accuracy = 0;       // fraction of masked positions predicted exactly
  double sop_accuracy = 0;
  std::int64_t masked_tokens = 0;
};

class AlbertModelImpl : public torch::nn::Module {
 public:
  // Parameters are drawn from `init_seed` through a generator of their own (never torch's global one) on
  // the CPU, then copied to wherever the module lives: the same seed gives bit-identical parameters on any
  // device. validate_albert_config() must have accepted `config`.
  AlbertModelImpl(const AlbertConfig& config, std::uint64_t init_seed);

  // Redraws every parameter from `init_seed` (see the constructor).
  void reset_parameters(std::uint64_t init_seed);

  // input_ids, token_type_ids [B, T] int64; attention_mask [B, T] (1 real, 0 padding) -> [B, T, H].
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                        const torch::Tensor& attention_mask);
  // The masked-LM logits [N, V] of hidden states [N, H].
  torch::Tensor mlm_logits(const torch::Tensor& hidden);
  // The sentence-order logits [B, 2] of a sequence output [B, T, H] (pooled from [CLS], position 0).
  torch::Tensor sop_logits(const torch::Tensor& sequence);
  // Both losses. mlm_labels [B, T]: the original id where a position is predicted, -100 elsewhere;
  // sop_labels [B]: 0 in order, 1 swapped. The MLM head runs on the masked positions only.
  AlbertLosses pretraining_losses(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                                  const torch::Tensor& attention_mask, const torch::Tensor& mlm_labels,
                                  const torch::Tensor& sop_labels);

  const AlbertConfig& config() const { return config_; }

  AlbertEmbeddings embeddings{nullptr};
  AlbertEncoder encoder{nullptr};
  torch::nn::Linear pooler{nullptr};
  AlbertMLMHead predictions{nullptr};
  AlbertSOPHead sop_classifier{nullptr};

 private:
  AlbertConfig config_;
};
TORCH_MODULE(AlbertModel);

// The label of positions that the masked-LM loss ignores (PyTorch's cross_entropy default).
inline constexpr std::int64_t kIgnoreLabel = -100;

}  // namespace dedloc::train
