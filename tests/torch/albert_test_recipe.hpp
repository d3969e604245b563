// The small ALBERT the torch tests build (albert_test.cpp, albert_hf_test.cpp): trains for a few hundred
// steps in seconds on two cores. Its tokenizer is cached in one folder of the build tree, shared by every
// test process, so it is trained once per build.
#pragma once

#include <string>

#include "dedloc/train/models/albert_task.hpp"
#include "support/test_paths.hpp"

namespace dedloc::test {

inline std::string albert_cache_dir() { return binary_path("tests/albert-cache"); }

inline train::AlbertRecipe small_albert_recipe() {
  train::AlbertRecipe recipe;
  recipe.size = "test";
  recipe.model.hidden_size = 64;
  recipe.model.embedding_size = 32;
  recipe.model.num_layers = 2;
  recipe.model.num_heads = 2;
  recipe.model.intermediate_size = 128;
  recipe.model.max_length = 64;
  recipe.model.vocab_size = 1000;
  recipe.data.corpus.max_documents = 4000;
  return recipe;
}

}  // namespace dedloc::test
