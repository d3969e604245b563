// A training state as dedloc-train's snapshot holds one for ALBERT, for the Hugging Face export's tests
// (tests/unit/collab/hf_export_test.cpp, tests/proc/hf_export_cli_test.cpp). Header-only: the binaries that
// include it link dedloc_collab.
#pragma once

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "dedloc/avg/training_state.hpp"
#include "dedloc/collab/hf_export.hpp"

namespace dedloc::test {

// A training state as dedloc-train's snapshot holds one: the ALBERT parameters under "param/", the parts
// an export leaves out (pooler, sentence-order head, optimizer statistics, a buffer) and the config entry.
// Every element differs from every other, so a tensor copied under the wrong name shows.
inline avg::TrainingState albert_state(const collab::AlbertHfConfig& config, const std::string& prefix = "param/",
                                       float base = 0, std::uint64_t epoch = 17) {
  std::vector<avg::TensorSpec> specs;
  for (const auto& t : collab::albert_hf_tensors(config)) specs.push_back({prefix + t.dedloc_name, t.shape});
  if (!prefix.empty()) {
    const auto H = static_cast<std::uint64_t>(config.hidden_size);
    specs.push_back({prefix + "pooler.weight", {H, H}});
    specs.push_back({prefix + "sop_classifier.classifier.weight", {2, H}});
    specs.push_back({"buffer/step", {1}});
    specs.push_back({"optim/embeddings.word_embeddings.weight.exp_avg",
                     {static_cast<std::uint64_t>(config.vocab_size), static_cast<std::uint64_t>(config.embedding_size)}});
  }
  avg::StateMetadata metadata;
  metadata.epoch = epoch;
  metadata.entries[std::string(collab::kAlbertConfigEntry)] = collab::albert_config_json(config);
  auto state = avg::TrainingState::with_tensors(std::move(specs), std::move(metadata));
  REQUIRE(state.is_ok());
  for (size_t k = 0; k < state->flat().size(); ++k) state->flat()[k] = base + 0.001f * static_cast<float>(k);
  return std::move(*state);
}

}  // namespace dedloc::test
