// The ALBERT pretraining task (docs/recipes.md): masked-LM plus sentence-order prediction on plain English text.
//
// Building one gets the corpus as token ids (token_corpus.hpp: from the cache in TaskContext::work_dir, or
// from dedloc-tokenize, which trains the SentencePiece tokenizer) and cuts each document into samples: runs
// of consecutive sentences that fit into max_length with [CLS] and two [SEP]s. A sample's id (what
// Batch::sample_ids holds) is its index in that cut, in corpus order. Token ids stay in memory. Each time a
// sample is drawn it becomes one ALBERT example:
//
//   [CLS] A [SEP] B [SEP] [PAD]...      A, B: the sample split at a random sentence boundary (inside the
//                                       sentence when it has only one); with probability 1/2 they are
//                                       swapped and the sentence-order label is 1
//
// and 15% (mlm_probability) of its ordinary tokens are predicted: 80% of them replaced by [MASK], 10% by a
// random piece, 10% kept (BERT's recipe, single tokens rather than ALBERT's n-grams).
//
// The task publishes its shape in every training state (state_entries) and, at the end of a run, exports the
// model for Hugging Face transformers (export_model, models/albert_export.hpp).
//
// Order and randomness come from TaskContext::data_seed alone: each pass over the samples is a
// permutation drawn from (data_seed, pass), and the split, swap and masks of a sample from (data_seed, pass,
// sample id). Batches are built on a prefetch thread.
//
// Recipe sections (every key optional unless marked):
//   model:  kind: albert (required)   size: tiny | albert-base | albert-large (default tiny)
//           hidden, embedding, layers, heads, intermediate, max_length, vocab_size, dropout  (override the
//           shape; vocab_size is what the tokenizer is trained for: a small corpus may give fewer pieces)
//   data:   kind: text (required)   paths: [files or directories] (default the fortunes directory)
//           max_documents: N (0: all)   mlm_probability: 0.15
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "dedloc/core/config.hpp"
#include "dedloc/train/data/text_corpus.hpp"
#include "dedloc/train/data/token_corpus.hpp"
#include "dedloc/train/models/albert.hpp"
#include "dedloc/train/task.hpp"

namespace dedloc::train {

// Batch::tensors, in this order. Every tensor is int64 on the task's device; T is the batch's longest
// example rounded up to a multiple of 8 (at most max_length).
struct AlbertBatchIndex {
  static constexpr std::size_t kInputIds = 0;       // [B, T] piece ids, [PAD] (0) after the example
  static constexpr std::size_t kTokenTypeIds = 1;   // [B, T] 1 for B [SEP], 0 for [CLS] A [SEP] and padding
  static constexpr std::size_t kAttentionMask = 2;  // [B, T] 1 for real tokens, 0 for padding
  static constexpr std::size_t kMlmLabels = 3;      // [B, T] the original id where predicted, else -100
  static constexpr std::size_t kSopLabels = 4;      // [B]    0: A then B in document order, 1: swapped
  static constexpr std::size_t kCount = 5;
};

struct AlbertDataOptions {
  TextCorpusOptions corpus;
  double mlm_probability = 0.15;  // in (0, 1)
};

struct AlbertRecipe {
  std::string size = "tiny";
  AlbertConfig model;  // model.vocab_size: the tokenizer's requested vocabulary
  AlbertDataOptions data;
};

// Reads and checks the "model:" and "data:" sections. It reads every key it supports and leaves unknown
// keys to the caller's ConfigReader::finish() on the root: call that between this and make_albert_task()
// to report a typo before the corpus is read and the tokenizer trained.
Result<AlbertRecipe> read_albert_recipe(ConfigReader model, ConfigReader data);

class AlbertTask final : public Task {
 public:
  ~AlbertTask() override;

  NamedTensors named_parameters() override;
  Result<Batch> next_batch() override;
  torch::Tensor loss(const Batch& batch) override;  // AlbertLosses::total, in training mode
  std::string describe() const override;
  // The shape, as collab::kAlbertConfigEntry: what `dedloc-avg export --format hf` writes config.json from.
  std::map<std::string, std::string> state_entries() const override;
  // The Hugging Face folder <dir>/hf (models/albert_export.hpp), with the tokenizer this run trained (cached
  // in TaskContext::work_dir); returns its path. kNotFound when that file is gone, or when the task had no
  // work directory.
  Result<std::string> export_model(const std::string& dir) override;

  // Both losses and accuracies of a batch, in training mode (loss() is losses().total).
  AlbertLosses losses(const Batch& batch);

  AlbertModel& model();
  // Token ids as text, for logs and tests (TokenizedCorpus::render).
  std::string render(const std::vector<std::int64_t>& ids) const;
  const AlbertConfig& config() const;  // vocab_size: the tokenizer's real vocabulary
  // The SentencePiece model file that made the token ids (in TaskContext::work_dir); "" without a work dir.
  const std::string& tokenizer_model() const;
  std::size_t document_count() const;
  std::size_t sample_count() const;

  struct State;  // defined in albert_task.cpp

 private:
  explicit AlbertTask(std::unique_ptr<State> state);
  friend Result<std::unique_ptr<AlbertTask>> make_albert_task(const AlbertRecipe& recipe, const TaskContext& context);

  std::unique_ptr<State> state_;
};

// Builds the task: token ids (cached in context.work_dir), samples, model (from init_seed, on
// context.device) and the prefetch thread. Errors: those of load_tokenized_corpus() (a corpus path without
// text, dedloc-tokenize missing or failing), and kInvalidArgument when no document yields a sample or
// micro_batch_size < 1.
Result<std::unique_ptr<AlbertTask>> make_albert_task(const AlbertRecipe& recipe, const TaskContext& context);

// What dedloc-train calls: read_albert_recipe() then make_albert_task().
Result<std::unique_ptr<Task>> make_albert_task(ConfigReader model, ConfigReader data, const TaskContext& context);

}  // namespace dedloc::train
