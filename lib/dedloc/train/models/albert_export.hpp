// dedloc's ALBERT model (albert.hpp) handed to the torch-free Hugging Face exporter (collab/hf_export.hpp):
// its shape under transformers' AlbertConfig names, and its parameters as a training state.
//
// AlbertTask uses both: the shape is what it publishes in every training state (Task::state_entries), and
// export_albert_hf() is its Task::export_model. Tests use them to export a model they built themselves.
#pragma once

#include <string>

#include <torch/torch.h>

#include "dedloc/avg/training_state.hpp"
#include "dedloc/collab/hf_export.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/train/models/albert.hpp"

namespace dedloc::train {

// transformers' name of the activation albert.cpp applies (its tanh-approximated GELU).
inline constexpr const char* kAlbertHfActivation = "gelu_new";

// `config` under transformers' AlbertConfig names (max_length -> max_position_embeddings, dropout -> both
// dropouts, init_std -> initializer_range, ...).
collab::AlbertHfConfig albert_hf_config(const AlbertConfig& config);

// The model's parameters under "param/<name>" (copied to the CPU as float32), with the metadata entry
// collab::kAlbertConfigEntry: what a trainer's snapshot holds of the model. kInternal when libtorch fails.
Result<avg::TrainingState> albert_parameter_state(AlbertModelImpl& model);

// Writes the Hugging Face folder `dir` of `model` with the SentencePiece model file `tokenizer_model`
// (collab::write_albert_hf_folder, whose errors it returns); returns `dir`.
Result<std::string> export_albert_hf(AlbertModelImpl& model, const std::string& tokenizer_model, const std::string& dir);

}  // namespace dedloc::train
