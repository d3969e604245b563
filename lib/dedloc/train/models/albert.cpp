#include "dedloc/train/models/albert.hpp"

#include <cmath>
#include <string>

#include <ATen/CPUGeneratorImpl.h>

namespace dedloc::train {
namespace {

namespace nn = torch::nn;

nn::LayerNorm layer_norm(const AlbertConfig& config, std::int64_t size) {
  return nn::LayerNorm(nn::LayerNormOptions({size}).eps(config.layer_norm_eps));
}

torch::Tensor gelu_new(const torch::Tensor& x) { return torch::gelu(x, "tanh"); }

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Result<AlbertConfig> albert_shape(std::string_view name) {
  AlbertConfig config;  // the defaults are the tiny shape
  if (name == "tiny") return config;
  if (name == "albert-base" || name == "albert-large") {
    config.vocab_size = 30000;
    config.embedding_size = 128;
    config.max_length = 512;
    bool large = name == "albert-large";
    config.hidden_size = large ? 1024 : 768;
    config.num_layers = large ? 24 : 12;
    config.num_heads = large ? 16 : 12;
    config.intermediate_size = large ? 4096 : 3072;
    return config;
  }
  return error(Code::kInvalidArgument,
               "unknown ALBERT size '" + std::string(name) + "' (expected tiny, albert-base or albert-large)");
}

Status validate_albert_config(const AlbertConfig& c) {
  auto at_least = [](const char* field, std::int64_t value, std::int64_t minimum) -> Status {
    if (value >= minimum) return Status::ok();
    return error(Code::kInvalidArgument,
                 std::string(field) + " is " + std::to_string(value) + ", must be at least " + std::to_string(minimum));
  };
  DEDLOC_RETURN_IF_ERROR(at_least("vocab_size", c.vocab_size, 16));
  DEDLOC_RETURN_IF_ERROR(at_least("embedding", c.embedding_size, 1));
  DEDLOC_RETURN_IF_ERROR(at_least("hidden", c.hidden_size, 1));
  DEDLOC_RETURN_IF_ERROR(at_least("layers", c.num_layers, 1));
  DEDLOC_RETURN_IF_ERROR(at_least("heads", c.num_heads, 1));
  DEDLOC_RETURN_IF_ERROR(at_least("intermediate", c.intermediate_size, 1));
  DEDLOC_RETURN_IF_ERROR(at_least("max_length", c.max_length, 8));  // [CLS] a [SEP] b [SEP] and some room
  if (c.hidden_size % c.num_heads != 0) {
    return error(Code::kInvalidArgument, "hidden " + std::to_string(c.hidden_size) + " is not divisible by heads " +
                                             std::to_string(c.num_heads));
  }
  if (!(c.dropout >= 0 && c.dropout < 1)) {
    return error(Code::kInvalidArgument, "dropout " + std::to_string(c.dropout) + " is outside [0, 1)");
  }
  return Status::ok();
}

std::int64_t albert_parameter_count(const AlbertConfig& c) {
  const std::int64_t V = c.vocab_size, E = c.embedding_size, H = c.hidden_size, I = c.intermediate_size;
  auto linear = [](std::int64_t in, std::int64_t out) { return in * out + out; };
  std::int64_t embeddings = V * E + c.max_length * E + c.type_vocab_size * E + 2 * E;
  std::int64_t layer = 4 * linear(H, H) + 2 * H + linear(H, I) + linear(I, H) + 2 * H;
  std::int64_t encoder = linear(E, H) + layer;
  std::int64_t pooler = linear(H, H);
  std::int64_t mlm = linear(H, E) + 2 * E + V;  // the decoder weight is the word embedding
  std::int64_t sop = linear(H, 2);
  return embeddings + encoder + pooler + mlm + sop;
}

AlbertEmbeddingsImpl::AlbertEmbeddingsImpl(const AlbertConfig& config) {
  word_embeddings = register_module("word_embeddings", nn::Embedding(config.vocab_size, config.embedding_size));
  position_embeddings =
      register_module("position_embeddings", nn::Embedding(config.max_length, config.embedding_size));
  token_type_embeddings =
      register_module("token_type_embeddings", nn::Embedding(config.type_vocab_size, config.embedding_size));
  LayerNorm = register_module("LayerNorm", layer_norm(config, config.embedding_size));
  dropout = register_module("dropout", nn::Dropout(config.dropout));
}

torch::Tensor AlbertEmbeddingsImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids) {
  auto positions = torch::arange(input_ids.size(1), input_ids.options());
  auto embedded = word_embeddings(input_ids) + position_embeddings(positions).unsqueeze(0) +
                  token_type_embeddings(token_type_ids);
  return dropout(LayerNorm(embedded));
}

AlbertAttentionImpl::AlbertAttentionImpl(const AlbertConfig& config) : num_heads(config.num_heads) {
  const auto H = config.hidden_size;
  query = register_module("query", nn::Linear(H, H));
  key = register_module("key", nn::Linear(H, H));
  value = register_module("value", nn::Linear(H, H));
  dense = register_module("dense", nn::Linear(H, H));
  LayerNorm = register_module("LayerNorm", layer_norm(config, H));
  dropout = register_module("dropout", nn::Dropout(config.dropout));
}

torch::Tensor AlbertAttentionImpl::forward(const torch::Tensor& hidden, const torch::Tensor& mask_bias) {
  const auto B = hidden.size(0), T = hidden.size(1), H = hidden.size(2);
  const auto head_size = H / num_heads;
  auto heads = [&](const torch::Tensor& x) { return x.view({B, T, num_heads, head_size}).transpose(1, 2); };
  auto q = heads(query(hidden));
  auto k = heads(key(hidden));
  auto v = heads(value(hidden));
  auto scores = torch::matmul(q, k.transpose(-1, -2)) * (1.0 / std::sqrt(static_cast<double>(head_size)));
  auto probabilities = dropout(torch::softmax(scores + mask_bias, -1));
  auto context = torch::matmul(probabilities, v).transpose(1, 2).reshape({B, T, H});
  return LayerNorm(hidden + dropout(dense(context)));
}

AlbertLayerImpl::AlbertLayerImpl(const AlbertConfig& config) {
  attention = register_module("attention", AlbertAttention(config));
  ffn = register_module("ffn", nn::Linear(config.hidden_size, config.intermediate_size));
  ffn_output = register_module("ffn_output", nn::Linear(config.intermediate_size, config.hidden_size));
  full_layer_layer_norm = register_module("full_layer_layer_norm", layer_norm(config, config.hidden_size));
  dropout = register_module("dropout", nn::Dropout(config.dropout));
}

torch::Tensor AlbertLayerImpl::forward(const torch::Tensor& hidden, const torch::Tensor& mask_bias) {
  auto attended = attention(hidden, mask_bias);
  auto transformed = ffn_output(gelu_new(ffn(attended)));
  return full_layer_layer_norm(attended + dropout(transformed));
}

AlbertEncoderImpl::AlbertEncoderImpl(const AlbertConfig& config) : num_layers(config.num_layers) {
  embedding_hidden_mapping_in =
      register_module("embedding_hidden_mapping_in", nn::Linear(config.embedding_size, config.hidden_size));
  layer = register_module("layer", AlbertLayer(config));
}

torch::Tensor AlbertEncoderImpl::forward(const torch::Tensor& embedded, const torch::Tensor& mask_bias) {
  auto hidden = embedding_hidden_mapping_in(embedded);
  for (std::int64_t i = 0; i < num_layers; ++i) hidden = layer(hidden, mask_bias);
  return hidden;
}

AlbertMLMHeadImpl::AlbertMLMHeadImpl(const AlbertConfig& config) {
  dense = register_module("dense", nn::Linear(config.hidden_size, config.embedding_size));
  LayerNorm = register_module("LayerNorm", layer_norm(config, config.embedding_size));
  bias = register_parameter("bias", torch::zeros({config.vocab_size}));
}

torch::Tensor AlbertMLMHeadImpl::forward(const torch::Tensor& hidden, const torch::Tensor& word_embeddings) {
  auto projected = LayerNorm(gelu_new(dense(hidden)));
  return torch::addmm(bias, projected, word_embeddings.t());
}

AlbertSOPHeadImpl::AlbertSOPHeadImpl(const AlbertConfig& config) {
  dropout = register_module("dropout", nn::Dropout(config.dropout));
  classifier = register_module("classifier", nn::Linear(config.hidden_size, 2));
}

torch::Tensor AlbertSOPHeadImpl::forward(const torch::Tensor& pooled) { return classifier(dropout(pooled)); }

AlbertModelImpl::AlbertModelImpl(const AlbertConfig& config, std::uint64_t init_seed) : config_(config) {
  embeddings = register_module("embeddings", AlbertEmbeddings(config));
  encoder = register_module("encoder", AlbertEncoder(config));
  pooler = register_module("pooler", nn::Linear(config.hidden_size, config.hidden_size));
  predictions = register_module("predictions", AlbertMLMHead(config));
  sop_classifier = register_module("sop_classifier", AlbertSOPHead(config));
  reset_parameters(init_seed);
}

void AlbertModelImpl::reset_parameters(std::uint64_t init_seed) {
  torch::NoGradGuard no_grad;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(init_seed);
  // named_parameters() has a fixed order, so each parameter gets the same draws on every peer.
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    torch::Tensor& parameter = item.value();
    if (ends_with(name, "bias")) {
      parameter.zero_();
    } else if (ends_with(name, "LayerNorm.weight") || ends_with(name, "layer_norm.weight")) {
      parameter.fill_(1.0);
    } else {
      auto drawn = torch::empty(parameter.sizes(), torch::kFloat32).normal_(0.0, config_.init_std, generator);
      parameter.copy_(drawn);
    }
  }
}

torch::Tensor AlbertModelImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                                       const torch::Tensor& attention_mask) {
  auto dtype = embeddings->word_embeddings->weight.scalar_type();
  // 0 where a key is a real token, -1e9 where it is padding: softmax then gives padding no weight.
  auto mask_bias = attention_mask.to(dtype).sub(1.0).mul(1e9).view({attention_mask.size(0), 1, 1, -1});
  return encoder(embeddings(input_ids, token_type_ids), mask_bias);
}

torch::Tensor AlbertModelImpl::mlm_logits(const torch::Tensor& hidden) {
  return predictions(hidden, embeddings->word_embeddings->weight);
}

torch::Tensor AlbertModelImpl::sop_logits(const torch::Tensor& sequence) {
  auto pooled = torch::tanh(pooler(sequence.select(1, 0)));
  return sop_classifier(pooled);
}

AlbertLosses AlbertModelImpl::pretraining_losses(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                                                 const torch::Tensor& attention_mask, const torch::Tensor& mlm_labels,
                                                 const torch::Tensor& sop_labels) {
  auto sequence = forward(input_ids, token_type_ids, attention_mask);
  const auto H = sequence.size(2);

  // The MLM head (H x E, then E x V) runs on the ~15% of positions that are predicted, not on all of them.
  auto flat_labels = mlm_labels.reshape({-1});
  auto predicted = flat_labels.ne(kIgnoreLabel).nonzero().squeeze(1);
  auto targets = flat_labels.index_select(0, predicted);
  auto logits = mlm_logits(sequence.reshape({-1, H}).index_select(0, predicted));
  auto sop = sop_logits(sequence);

  AlbertLosses losses;
  losses.masked_tokens = predicted.size(0);
  losses.mlm = losses.masked_tokens > 0 ? torch::cross_entropy_loss(logits, targets)
                                        : torch::zeros({}, sequence.options());
  losses.sop = torch::cross_entropy_loss(sop, sop_labels);
  losses.total = losses.mlm + losses.sop;
  {
    torch::NoGradGuard no_grad;
    if (losses.masked_tokens > 0) {
      losses.mlm_accuracy = logits.argmax(-1).eq(targets).to(torch::kFloat64).mean().item<double>();
    }
    losses.sop_accuracy = sop.argmax(-1).eq(sop_labels).to(torch::kFloat64).mean().item<double>();
    losses.mlm = losses.mlm.detach();
    losses.sop = losses.sop.detach();
  }
  return losses;
}

}  // namespace dedloc::train
