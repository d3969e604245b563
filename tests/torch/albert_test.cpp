// The ALBERT task end to end on the real fortunes corpus: the model's shapes and seeds, the batch layout,
// recipe errors, and a short training run whose masked-LM loss must fall. (The corpus and the tokenizer
// have their own torch-free tests: tests/unit/text_test.cpp.)
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <numeric>
#include <set>

#include "dedloc/core/config.hpp"
#include "dedloc/core/files.hpp"
#include "dedloc/train/data/token_corpus.hpp"
#include "dedloc/train/models/albert.hpp"
#include "dedloc/train/models/albert_task.hpp"
#include "albert_test_recipe.hpp"
#include "support/test_paths.hpp"

// Debian's libtorch logs through glog, whose CHECK(condition) macro would replace Catch's: torch headers
// come first, then Catch defines CHECK afresh.
#undef CHECK
#include <catch2/catch.hpp>

using namespace dedloc;
using namespace dedloc::train;

namespace {

std::string cache_dir() { return test::albert_cache_dir(); }
AlbertRecipe small_recipe() { return test::small_albert_recipe(); }

TaskContext make_context(std::uint64_t init_seed, std::uint64_t data_seed, std::int64_t batch_size = 16) {
  TaskContext context;
  context.init_seed = init_seed;
  context.data_seed = data_seed;
  context.micro_batch_size = batch_size;
  context.work_dir = cache_dir();
  return context;
}

std::unique_ptr<AlbertTask> make_task(const TaskContext& context, const AlbertRecipe& recipe = small_recipe()) {
  auto task = make_albert_task(recipe, context);
  INFO(task.status().to_string());
  REQUIRE(task.is_ok());
  return std::move(*task);
}

Batch next_batch(Task& task) {
  auto batch = task.next_batch();
  INFO(batch.status().to_string());
  REQUIRE(batch.is_ok());
  return std::move(*batch);
}

std::vector<std::int64_t> to_vector(const torch::Tensor& t) {
  auto flat = t.to(torch::kCPU).contiguous().view({-1});
  return {flat.data_ptr<std::int64_t>(), flat.data_ptr<std::int64_t>() + flat.numel()};
}

}  // namespace

TEST_CASE("ALBERT-base has about 12 M parameters and HF-like names", "[torch][albert][model]") {
  auto base = albert_shape("albert-base");
  REQUIRE(base.is_ok());
  std::int64_t expected = albert_parameter_count(*base);
  CHECK(expected > 11'000'000);
  CHECK(expected < 12'000'000);

  AlbertModel model(*base, 1);
  std::int64_t built = 0;
  std::set<std::string> names;
  for (const auto& item : model->named_parameters()) {
    built += item.value().numel();
    names.insert(item.key());
  }
  CHECK(built == expected);
  for (const char* name : {"embeddings.word_embeddings.weight", "embeddings.LayerNorm.weight",
                           "encoder.embedding_hidden_mapping_in.weight", "encoder.layer.attention.query.weight",
                           "encoder.layer.attention.LayerNorm.weight", "encoder.layer.ffn.weight",
                           "encoder.layer.full_layer_layer_norm.bias", "pooler.weight", "predictions.bias",
                           "sop_classifier.classifier.weight"}) {
    INFO(name);
    CHECK(names.count(name) == 1);
  }
  CHECK(names.size() == 32);  // 5 embeddings + 2 mapping + 16 layer + 2 pooler + 5 MLM head + 2 SOP

  auto large = albert_shape("albert-large");
  REQUIRE(large.is_ok());
  CHECK(albert_parameter_count(*large) > 17'000'000);
  CHECK(albert_parameter_count(*large) < 19'000'000);
  CHECK_FALSE(albert_shape("albert-xxl").is_ok());
}

TEST_CASE("The same init_seed gives identical parameters, the data_seed its own batch order",
          "[torch][albert][seeds]") {
  auto first = make_task(make_context(7, 1));
  auto same_init = make_task(make_context(7, 2));
  auto params_a = first->named_parameters();
  auto params_b = same_init->named_parameters();
  REQUIRE(params_a.size() == params_b.size());
  for (size_t i = 0; i < params_a.size(); ++i) {
    INFO(params_a[i].first);
    CHECK(params_a[i].first == params_b[i].first);
    CHECK(torch::equal(params_a[i].second, params_b[i].second));
  }

  AlbertModel other_init(first->config(), 8);
  CHECK_FALSE(torch::equal(other_init->named_parameters()["encoder.layer.ffn.weight"],
                           first->model()->named_parameters()["encoder.layer.ffn.weight"]));

  // Different data seeds: different samples; the same data seed: the very same batches.
  Batch a = next_batch(*first);
  Batch b = next_batch(*same_init);
  CHECK(a.sample_ids != b.sample_ids);
  auto replay = make_task(make_context(99, 1));
  Batch c = next_batch(*replay);
  CHECK(a.sample_ids == c.sample_ids);
  REQUIRE(a.tensors.size() == c.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) CHECK(torch::equal(a.tensors[i], c.tensors[i]));

  // Weight decay: matrices and embeddings decay, biases and LayerNorm weights do not.
  size_t decayed = 0;
  for (const auto& [name, tensor] : params_a) {
    bool norm_or_bias = name.ends_with("bias") || name.find("LayerNorm") != std::string::npos ||
                        name.find("layer_norm") != std::string::npos;
    INFO(name);
    CHECK(first->decays(name) == !norm_or_bias);
    CHECK(first->decays(name) == (tensor.dim() == 2));
    decayed += first->decays(name) ? 1 : 0;
  }
  CHECK(decayed == 13);  // 3 embeddings, the mapping, q k v dense ffn ffn_output, 3 head matrices
}

TEST_CASE("Batches hold [CLS] A [SEP] B [SEP] with 15% of the tokens predicted", "[torch][albert][batch]") {
  auto task = make_task(make_context(1, 3));
  CHECK(task->config().vocab_size == 1000);
  CHECK(task->sample_count() >= task->document_count());
  CHECK_THAT(task->describe(), Catch::StartsWith("albert test ("));

  std::int64_t predicted = 0, ordinary = 0, masked = 0, swapped = 0, rows = 0;
  std::set<std::uint64_t> seen;
  for (int step = 0; step < 20; ++step) {
    Batch batch = next_batch(*task);
    REQUIRE(batch.size() == 16);
    REQUIRE(batch.tensors.size() == AlbertBatchIndex::kCount);
    const auto& ids = batch.tensors[AlbertBatchIndex::kInputIds];
    const auto T = ids.size(1);
    REQUIRE(ids.size(0) == 16);
    REQUIRE(T % 8 == 0);
    REQUIRE(T <= 64);
    for (size_t i = 0; i < AlbertBatchIndex::kSopLabels; ++i) {
      REQUIRE(batch.tensors[i].sizes() == ids.sizes());
      REQUIRE(batch.tensors[i].scalar_type() == torch::kLong);
    }
    REQUIRE(batch.tensors[AlbertBatchIndex::kSopLabels].sizes() == torch::IntArrayRef{16});
    auto id = to_vector(ids);
    auto type = to_vector(batch.tensors[AlbertBatchIndex::kTokenTypeIds]);
    auto mask = to_vector(batch.tensors[AlbertBatchIndex::kAttentionMask]);
    auto label = to_vector(batch.tensors[AlbertBatchIndex::kMlmLabels]);
    auto order = to_vector(batch.tensors[AlbertBatchIndex::kSopLabels]);
    for (std::int64_t row = 0; row < 16; ++row, ++rows) {
      const std::int64_t* r_id = id.data() + row * T;
      const std::int64_t* r_type = type.data() + row * T;
      const std::int64_t* r_mask = mask.data() + row * T;
      const std::int64_t* r_label = label.data() + row * T;
      std::int64_t length = std::accumulate(r_mask, r_mask + T, std::int64_t{0});
      REQUIRE(length >= 5);
      REQUIRE(r_id[0] == SpecialTokens::kCls);
      REQUIRE(r_id[length - 1] == SpecialTokens::kSep);
      std::vector<std::int64_t> seps;
      for (std::int64_t t = 0; t < T; ++t) {
        REQUIRE(r_mask[t] == (t < length ? 1 : 0));
        if (t >= length) REQUIRE(r_id[t] == SpecialTokens::kPad);
        if (r_id[t] == SpecialTokens::kSep) seps.push_back(t);
        if (t > 0) REQUIRE(r_id[t] != SpecialTokens::kCls);
      }
      REQUIRE(seps.size() == 2);
      for (std::int64_t t = 0; t < T; ++t) REQUIRE(r_type[t] == (t > seps[0] && t < length ? 1 : 0));
      for (std::int64_t t = 0; t < length; ++t) {
        bool special = t == 0 || t == seps[0] || t == seps[1];
        if (special) {
          REQUIRE(r_label[t] == kIgnoreLabel);
          continue;
        }
        ++ordinary;
        if (r_label[t] == kIgnoreLabel) {
          REQUIRE(r_id[t] != SpecialTokens::kMask);
          continue;
        }
        ++predicted;
        REQUIRE(r_label[t] >= SpecialTokens::kUnk);
        if (r_id[t] == SpecialTokens::kMask) ++masked;
      }
      for (std::int64_t t = length; t < T; ++t) REQUIRE(r_label[t] == kIgnoreLabel);
      REQUIRE(order[row] >= 0);
      REQUIRE(order[row] <= 1);
      swapped += order[row];
    }
    seen.insert(batch.sample_ids.begin(), batch.sample_ids.end());
  }
  CHECK(seen.size() == 320);  // 20 x 16 draws from thousands of samples: no repeat within a pass
  double predicted_share = static_cast<double>(predicted) / static_cast<double>(ordinary);
  double masked_share = static_cast<double>(masked) / static_cast<double>(predicted);
  double swapped_share = static_cast<double>(swapped) / static_cast<double>(rows);
  CHECK(predicted_share > 0.14);
  CHECK(predicted_share < 0.20);  // at least one per example lifts short ones above 15%
  CHECK(masked_share > 0.7);
  CHECK(masked_share < 0.9);
  CHECK(swapped_share > 0.4);
  CHECK(swapped_share < 0.6);
}

TEST_CASE("Recipe errors name the key, the value and the file", "[torch][albert][recipe]") {
  auto read = [](const std::string& yaml) {
    auto root = ConfigReader::from_string(yaml, "recipe.yaml");
    REQUIRE(root.is_ok());
    auto recipe = read_albert_recipe(root->section("model"), root->section("data"));
    return std::make_pair(recipe.status(), root->finish());
  };

  auto [ok_read, ok_finish] = read(
      "model: {kind: albert, size: albert-base, layers: 6, dropout: 0.1}\n"
      "data: {kind: text, paths: [/usr/share/games/fortunes], max_documents: 5, mlm_probability: 0.2}\n");
  CHECK(ok_read.is_ok());
  CHECK(ok_finish.is_ok());

  auto [typo_read, typo_finish] = read("model: {kind: albert, hiden: 64}\ndata: {kind: text}\n");
  CHECK(typo_read.is_ok());  // unknown keys are the root's finish() to report
  REQUIRE_FALSE(typo_finish.is_ok());
  CHECK_THAT(typo_finish.message(), Catch::Contains("hiden"));
  CHECK_THAT(typo_finish.message(), Catch::Contains("recipe.yaml"));

  auto [kind_read, kind_finish] = read("model: {kind: bert}\ndata: {kind: text}\n");
  REQUIRE_FALSE(kind_read.is_ok());
  CHECK_THAT(kind_read.message(), Catch::Contains("bert"));

  auto [size_read, size_finish] = read("model: {kind: albert, size: albert-huge}\ndata: {kind: text}\n");
  REQUIRE_FALSE(size_read.is_ok());
  CHECK_THAT(size_read.message(), Catch::Contains("albert-huge"));

  auto [heads_read, heads_finish] = read("model: {kind: albert, hidden: 100, heads: 3}\ndata: {kind: text}\n");
  REQUIRE_FALSE(heads_read.is_ok());
  CHECK_THAT(heads_read.message(), Catch::Contains("heads"));

  auto [p_read, p_finish] = read("model: {kind: albert}\ndata: {kind: text, mlm_probability: 1.5}\n");
  REQUIRE_FALSE(p_read.is_ok());
  CHECK_THAT(p_read.message(), Catch::Contains("mlm_probability"));

  auto [data_read, data_finish] = read("model: {kind: albert}\ndata: {kind: images}\n");
  REQUIRE_FALSE(data_read.is_ok());
  CHECK_THAT(data_read.message(), Catch::Contains("images"));

  // Through the entry point dedloc-train calls: a corpus that is not there.
  auto root = ConfigReader::from_string("model: {kind: albert}\ndata: {kind: text, paths: [/nonexistent/text]}\n",
                                        "recipe.yaml");
  REQUIRE(root.is_ok());
  auto task = make_albert_task(root->section("model"), root->section("data"), make_context(0, 0));
  REQUIRE_FALSE(task.is_ok());
  CHECK(task.status().code() == Code::kNotFound);
  CHECK_THAT(task.status().message(), Catch::Contains("/nonexistent/text"));
}

TEST_CASE("Adam trains a small ALBERT on the fortunes: the masked-LM loss falls", "[torch][albert][train]") {
  auto task = make_task(make_context(3, 4));
  torch::optim::Adam optimizer(task->model()->parameters(), torch::optim::AdamOptions(3e-3));
  auto train_step = [&](const Batch& batch) {
    optimizer.zero_grad();
    AlbertLosses losses = task->losses(batch);
    losses.total.backward();
    optimizer.step();
    return losses.mlm.item<double>();
  };
  auto mean = [](auto begin, auto end) { return std::accumulate(begin, end, 0.0) / static_cast<double>(end - begin); };
  const auto started = std::chrono::steady_clock::now();

  // Fresh batches: from uniform guessing over 1000 pieces (ln 1000 = 6.9) to the corpus's token statistics.
  constexpr int kFreshSteps = 250;
  constexpr int kWindow = 50;
  std::vector<double> fresh;
  for (int step = 0; step < kFreshSteps; ++step) fresh.push_back(train_step(next_batch(*task)));
  const double initial = fresh.front();
  const double late = mean(fresh.end() - kWindow, fresh.end());

  // A few batches revisited: fitting their masked tokens takes each example's context, carried by the
  // shared layer's attention (the token statistics alone stay near 5.6).
  std::vector<Batch> fixed;
  for (int i = 0; i < 4; ++i) fixed.push_back(next_batch(*task));
  auto fixed_loss = [&] {
    torch::NoGradGuard no_grad;
    double total = 0;
    for (const auto& batch : fixed) total += task->losses(batch).mlm.item<double>();
    return total / static_cast<double>(fixed.size());
  };
  const double fixed_before = fixed_loss();
  for (int step = 0; step < 160; ++step) train_step(fixed[static_cast<size_t>(step) % fixed.size()]);
  const double fixed_after = fixed_loss();

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  WARN("masked-LM loss on fresh batches " << initial << " -> " << late << " (mean of the last " << kWindow
                                          << "); on 4 revisited batches " << fixed_before << " -> " << fixed_after
                                          << "; " << seconds << " s");
  CHECK(initial > 6.5);
  CHECK(initial < 7.3);
  CHECK(late < initial - 0.7);              // the stated margins
  CHECK(fixed_after < fixed_before - 3.0);
  CHECK(fixed_after < 1.5);
}
