#include "dedloc/train/models/albert_export.hpp"

#include <vector>

namespace dedloc::train {

collab::AlbertHfConfig albert_hf_config(const AlbertConfig& c) {
  collab::AlbertHfConfig out;
  out.vocab_size = c.vocab_size;
  out.embedding_size = c.embedding_size;
  out.hidden_size = c.hidden_size;
  out.num_hidden_layers = c.num_layers;
  out.num_attention_heads = c.num_heads;
  out.intermediate_size = c.intermediate_size;
  out.max_position_embeddings = c.max_length;
  out.type_vocab_size = c.type_vocab_size;
  out.hidden_dropout_prob = c.dropout;  // albert.cpp applies one dropout rate everywhere
  out.attention_probs_dropout_prob = c.dropout;
  out.layer_norm_eps = c.layer_norm_eps;
  out.initializer_range = c.init_std;
  out.hidden_act = kAlbertHfActivation;
  return out;
}

Result<avg::TrainingState> albert_parameter_state(AlbertModelImpl& model) {
  try {
    torch::NoGradGuard no_grad;
    avg::TrainingState state;
    for (const auto& item : model.named_parameters()) {
      auto values = item.value().detach().to(torch::kCPU, torch::kFloat32).contiguous();
      std::vector<std::uint64_t> shape(values.sizes().begin(), values.sizes().end());
      DEDLOC_RETURN_IF_ERROR(state.add_tensor(
          "param/" + item.key(), std::move(shape),
          std::span<const float>(values.data_ptr<float>(), static_cast<size_t>(values.numel()))));
    }
    state.metadata.entries[std::string(collab::kAlbertConfigEntry)] =
        collab::albert_config_json(albert_hf_config(model.config()));
    return state;
  } catch (const std::exception& e) {
    return error(Code::kInternal, std::string("copying the ALBERT parameters: ") + e.what());
  }
}

Result<std::string> export_albert_hf(AlbertModelImpl& model, const std::string& tokenizer_model, const std::string& dir) {
  auto state = albert_parameter_state(model);
  if (!state) return state.status();
  DEDLOC_RETURN_IF_ERROR(collab::write_albert_hf_folder(*state, tokenizer_model, dir));
  return dir;
}

}  // namespace dedloc::train
