#include "dedloc/train/models/albert_task.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <span>
#include <utility>

#include "dedloc/train/models/albert_export.hpp"
#include "dedloc/train/data/sample_order.hpp"
#include "dedloc/train/data/split_mix.hpp"
#include "dedloc/train/prefetcher.hpp"

namespace dedloc::train {
namespace {

constexpr size_t kPrefetchDepth = 4;
constexpr std::int64_t kSpecialTokens = 3;  // [CLS] A [SEP] B [SEP]

// A run of consecutive sentences of one document, tokenized.
struct Sample {
  std::vector<std::int32_t> tokens;
  std::vector<std::uint32_t> sentence_ends;  // cumulative token counts; the last one is tokens.size()
};

std::vector<Sample> make_samples(const TokenizedCorpus& corpus, std::int64_t max_length) {
  const size_t budget = static_cast<size_t>(max_length - kSpecialTokens);
  std::vector<Sample> samples;
  auto emit = [&](Sample& sample) {
    if (sample.tokens.size() >= 2) samples.push_back(std::move(sample));
    sample = {};
  };
  for (const auto& document : corpus.documents) {
    Sample current;
    for (const TokenIds& sentence : document) {
      if (sentence.empty()) continue;
      const size_t length = std::min(sentence.size(), budget);
      if (!current.tokens.empty() && current.tokens.size() + length > budget) emit(current);
      current.tokens.insert(current.tokens.end(), sentence.begin(),
                            sentence.begin() + static_cast<std::ptrdiff_t>(length));
      current.sentence_ends.push_back(static_cast<std::uint32_t>(current.tokens.size()));
    }
    emit(current);
  }
  return samples;
}

struct Example {
  std::vector<std::int64_t> ids, types, labels;
  std::int64_t order_label = 0;
};

// Turns samples into batches, pass after pass. Used by the prefetch thread only.
class BatchMaker {
 public:
  struct Options {
    std::uint64_t data_seed = 0;
    std::int64_t batch_size = 32;
    double mlm_probability = 0.15;
    std::int64_t vocab_size = 0;
    std::int64_t max_length = 128;
    torch::Device device = torch::kCPU;
  };

  BatchMaker(std::shared_ptr<const std::vector<Sample>> samples, Options options)
      : samples_(std::move(samples)), options_(options), order_(samples_->size(), options.data_seed) {}

  Result<Batch> next() {
    Batch batch;
    std::vector<Example> examples;
    for (std::int64_t i = 0; i < options_.batch_size; ++i) {
      const std::uint64_t id = order_.next();
      SplitMix rng(mix_seeds(mix_seeds(options_.data_seed, order_.pass()), id));
      examples.push_back(make_example((*samples_)[id], rng));
      batch.sample_ids.push_back(id);
    }
    try {
      batch.tensors = to_tensors(examples);
    } catch (const std::exception& e) {
      return error(Code::kInternal, std::string("building an ALBERT batch: ") + e.what());
    }
    return batch;
  }

 private:
  Example make_example(const Sample& sample, SplitMix& rng) const {
    const auto& tokens = sample.tokens;
    const size_t k = sample.sentence_ends.size();
    size_t split = k >= 2 ? sample.sentence_ends[rng.below(k - 1)] : 1 + rng.below(tokens.size() - 1);
    std::span<const std::int32_t> a(tokens.data(), split);
    std::span<const std::int32_t> b(tokens.data() + split, tokens.size() - split);
    Example example;
    if (rng.uniform() < 0.5) {
      std::swap(a, b);
      example.order_label = 1;
    }

    example.ids.push_back(SpecialTokens::kCls);
    example.ids.insert(example.ids.end(), a.begin(), a.end());
    example.ids.push_back(SpecialTokens::kSep);
    example.types.assign(example.ids.size(), 0);
    example.ids.insert(example.ids.end(), b.begin(), b.end());
    example.ids.push_back(SpecialTokens::kSep);
    example.types.resize(example.ids.size(), 1);
    example.labels.assign(example.ids.size(), kIgnoreLabel);

    // Predict round(p * n) of the n ordinary tokens (at least one), drawn without replacement.
    std::vector<size_t> candidates;
    for (size_t i = 1; i <= a.size(); ++i) candidates.push_back(i);
    for (size_t i = a.size() + 2; i < example.ids.size() - 1; ++i) candidates.push_back(i);
    auto count = static_cast<size_t>(std::llround(options_.mlm_probability * static_cast<double>(candidates.size())));
    count = std::clamp<size_t>(count, 1, candidates.size());
    for (size_t i = 0; i < count; ++i) {
      std::swap(candidates[i], candidates[i + rng.below(candidates.size() - i)]);
      size_t position = candidates[i];
      example.labels[position] = example.ids[position];
      double r = rng.uniform();
      if (r < 0.8) {
        example.ids[position] = SpecialTokens::kMask;
      } else if (r < 0.9) {
        auto ordinary = static_cast<std::uint64_t>(options_.vocab_size - SpecialTokens::kFirstPiece);
        example.ids[position] = SpecialTokens::kFirstPiece + static_cast<std::int64_t>(rng.below(ordinary));
      }
    }
    return example;
  }

  std::vector<torch::Tensor> to_tensors(const std::vector<Example>& examples) const {
    size_t longest = 0;
    for (const auto& example : examples) longest = std::max(longest, example.ids.size());
    const auto B = static_cast<std::int64_t>(examples.size());
    const auto T = std::min<std::int64_t>(options_.max_length, static_cast<std::int64_t>((longest + 7) / 8 * 8));
    auto ids = torch::zeros({B, T}, torch::kLong);
    auto types = torch::zeros({B, T}, torch::kLong);
    auto mask = torch::zeros({B, T}, torch::kLong);
    auto labels = torch::full({B, T}, kIgnoreLabel, torch::kLong);
    auto order = torch::empty({B}, torch::kLong);
    for (std::int64_t row = 0; row < B; ++row) {
      const Example& example = examples[static_cast<size_t>(row)];
      const size_t n = example.ids.size();
      std::copy_n(example.ids.data(), n, ids.data_ptr<std::int64_t>() + row * T);
      std::copy_n(example.types.data(), n, types.data_ptr<std::int64_t>() + row * T);
      std::fill_n(mask.data_ptr<std::int64_t>() + row * T, n, 1);
      std::copy_n(example.labels.data(), n, labels.data_ptr<std::int64_t>() + row * T);
      order.data_ptr<std::int64_t>()[row] = example.order_label;
    }
    std::vector<torch::Tensor> tensors = {ids, types, mask, labels, order};
    if (options_.device != torch::kCPU) {
      for (auto& tensor : tensors) tensor = tensor.to(options_.device);
    }
    return tensors;
  }

  std::shared_ptr<const std::vector<Sample>> samples_;
  Options options_;
  SampleOrder order_;
};

std::string millions(std::int64_t count) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f M", static_cast<double>(count) / 1e6);
  return text;
}

}  // namespace

struct AlbertTask::State {
  std::string size;
  AlbertConfig config;
  std::string tokenizer_model;  // the SentencePiece model file; "" when there was no work dir
  TokenizedCorpus vocabulary;  // pieces only: the documents are in `samples`
  AlbertModel model{nullptr};
  size_t documents = 0;
  std::shared_ptr<const std::vector<Sample>> samples;
  std::unique_ptr<BatchMaker> batch_maker;
  std::unique_ptr<Prefetcher<Batch>> prefetcher;  // last: stopped before what it reads goes away
};

AlbertTask::AlbertTask(std::unique_ptr<State> state) : state_(std::move(state)) {}
AlbertTask::~AlbertTask() = default;

NamedTensors AlbertTask::named_parameters() {
  NamedTensors out;
  for (auto& item : state_->model->named_parameters()) out.emplace_back(item.key(), item.value());
  return out;
}

Result<Batch> AlbertTask::next_batch() { return state_->prefetcher->next(); }

AlbertLosses AlbertTask::losses(const Batch& batch) {
  TORCH_CHECK(batch.tensors.size() == AlbertBatchIndex::kCount, "not an ALBERT batch: ", batch.tensors.size(),
              " tensors");
  state_->model->train();
  const auto& t = batch.tensors;
  return state_->model->pretraining_losses(t[AlbertBatchIndex::kInputIds], t[AlbertBatchIndex::kTokenTypeIds],
                                           t[AlbertBatchIndex::kAttentionMask], t[AlbertBatchIndex::kMlmLabels],
                                           t[AlbertBatchIndex::kSopLabels]);
}

torch::Tensor AlbertTask::loss(const Batch& batch) { return losses(batch).total; }

std::string AlbertTask::describe() const {
  const AlbertConfig& c = state_->config;
  return "albert " + state_->size + " (" + millions(albert_parameter_count(c)) + " parameters: H" +
         std::to_string(c.hidden_size) + " E" + std::to_string(c.embedding_size) + ", " +
         std::to_string(c.num_layers) + " shared layers x " + std::to_string(c.num_heads) + " heads, vocab " +
         std::to_string(c.vocab_size) + "; " + std::to_string(state_->documents) + " documents, " +
         std::to_string(state_->samples->size()) + " samples)";
}

std::map<std::string, std::string> AlbertTask::state_entries() const {
  return {{std::string(collab::kAlbertConfigEntry), collab::albert_config_json(albert_hf_config(state_->config))}};
}

Result<std::string> AlbertTask::export_model(const std::string& dir) {
  if (state_->tokenizer_model.empty()) {
    return error(Code::kNotFound, "no tokenizer to export: the task ran without a work directory");
  }
  return export_albert_hf(*state_->model, state_->tokenizer_model, dir + "/hf");
}

AlbertModel& AlbertTask::model() { return state_->model; }
const std::string& AlbertTask::tokenizer_model() const { return state_->tokenizer_model; }
std::string AlbertTask::render(const std::vector<std::int64_t>& ids) const { return state_->vocabulary.render(ids); }
const AlbertConfig& AlbertTask::config() const { return state_->config; }
std::size_t AlbertTask::document_count() const { return state_->documents; }
std::size_t AlbertTask::sample_count() const { return state_->samples->size(); }

Result<AlbertRecipe> read_albert_recipe(ConfigReader model, ConfigReader data) {
  AlbertRecipe recipe;
  std::string kind;
  model.read("kind", kind);
  if (kind != "albert") {
    return error(Code::kInvalidArgument, model.where() + ": kind is '" + kind + "', expected 'albert'");
  }
  model.read("size", recipe.size);
  auto shape = albert_shape(recipe.size);
  if (!shape) return shape.status().with_context(model.where());
  recipe.model = *shape;
  AlbertConfig& m = recipe.model;
  model.read("hidden", m.hidden_size);
  model.read("embedding", m.embedding_size);
  model.read("layers", m.num_layers);
  model.read("heads", m.num_heads);
  model.read("intermediate", m.intermediate_size);
  model.read("max_length", m.max_length);
  model.read("vocab_size", m.vocab_size);
  model.read("dropout", m.dropout);
  DEDLOC_RETURN_IF_ERROR(validate_albert_config(m).with_context(model.where()));
  if (m.vocab_size > std::numeric_limits<int>::max()) {
    return error(Code::kInvalidArgument,
                 model.where() + ": vocab_size " + std::to_string(m.vocab_size) + " is too large");
  }

  std::string data_kind;
  data.read("kind", data_kind);
  if (data_kind != "text") {
    return error(Code::kInvalidArgument, data.where() + ": kind is '" + data_kind + "', expected 'text'");
  }
  data.read("paths", recipe.data.corpus.paths);
  data.read("max_documents", recipe.data.corpus.max_documents);
  data.read("mlm_probability", recipe.data.mlm_probability);
  if (recipe.data.corpus.paths.empty()) return error(Code::kInvalidArgument, data.where() + ": paths is empty");
  if (recipe.data.corpus.max_documents < 0) {
    return error(Code::kInvalidArgument, data.where() + ": max_documents must be at least 0");
  }
  double p = recipe.data.mlm_probability;
  if (!(p > 0 && p < 1)) {
    return error(Code::kInvalidArgument,
                 data.where() + ": mlm_probability " + std::to_string(p) + " is outside (0, 1)");
  }
  return recipe;
}

Result<std::unique_ptr<AlbertTask>> make_albert_task(const AlbertRecipe& recipe, const TaskContext& context) {
  if (context.micro_batch_size < 1) {
    return error(Code::kInvalidArgument, "micro_batch_size " + std::to_string(context.micro_batch_size) +
                                             " must be at least 1");
  }
  DEDLOC_RETURN_IF_ERROR(validate_albert_config(recipe.model));
  const auto started = std::chrono::steady_clock::now();
  Logger& log = *context.log;

  TokenizeOptions tokenize;
  tokenize.corpus = recipe.data.corpus;
  tokenize.vocab_size = static_cast<int>(recipe.model.vocab_size);
  tokenize.work_dir = context.work_dir;
  auto tokens = load_tokenized_corpus(tokenize, &log);
  if (!tokens) return tokens.status();
  if (tokens->vocab_size() <= SpecialTokens::kFirstPiece) {
    return error(Code::kMalformed,
                 "a vocabulary of " + std::to_string(tokens->vocab_size()) + " pieces has no ordinary piece");
  }

  auto state = std::make_unique<AlbertTask::State>();
  state->size = recipe.size;
  state->config = recipe.model;
  state->config.vocab_size = tokens->vocab_size();
  // dedloc-tokenize cached the model that made these ids beside the token file (token_corpus.hpp); a
  // temporary work dir is gone by now.
  if (!context.work_dir.empty()) {
    state->tokenizer_model =
        (std::filesystem::path(context.work_dir) / tokenizer_model_file_name(tokens->key, tokenize.vocab_size)).string();
  }
  state->documents = tokens->documents.size();
  auto samples = make_samples(*tokens, state->config.max_length);
  if (samples.empty()) {
    return error(Code::kInvalidArgument, "no document of the corpus holds two tokens to make a sample");
  }
  state->samples = std::make_shared<const std::vector<Sample>>(std::move(samples));
  tokens->documents = {};
  state->vocabulary = std::move(*tokens);

  try {
    state->model = AlbertModel(state->config, context.init_seed);
    state->model->to(context.device);
    state->model->train();
  } catch (const std::exception& e) {
    return error(Code::kInternal, std::string("building the ALBERT model: ") + e.what());
  }

  BatchMaker::Options batch_options{.data_seed = context.data_seed,
                                    .batch_size = context.micro_batch_size,
                                    .mlm_probability = recipe.data.mlm_probability,
                                    .vocab_size = state->config.vocab_size,
                                    .max_length = state->config.max_length,
                                    .device = context.device};
  state->batch_maker = std::make_unique<BatchMaker>(state->samples, batch_options);
  state->prefetcher =
      std::make_unique<Prefetcher<Batch>>(kPrefetchDepth, [maker = state->batch_maker.get()] { return maker->next(); });

  std::unique_ptr<AlbertTask> task(new AlbertTask(std::move(state)));
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  log.info("albert") << task->describe() << ", ready in " << seconds << " s";
  return task;
}

Result<std::unique_ptr<Task>> make_albert_task(ConfigReader model, ConfigReader data, const TaskContext& context) {
  auto recipe = read_albert_recipe(std::move(model), std::move(data));
  if (!recipe) return recipe.status();
  auto task = make_albert_task(*recipe, context);
  if (!task) return task.status();
  return std::unique_ptr<Task>(std::move(*task));
}

}  // namespace dedloc::train
