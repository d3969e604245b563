// The small recipe for fast tests and first runs: a multi-layer perceptron regressing a fixed "teacher"
// network's outputs (plus noise) from Gaussian inputs.
//
// The dataset is a pure function of data.seed, the same on every peer; each peer walks through it in its
// own order (TaskContext::data_seed), one fresh permutation per pass. Because the data is tiny and exact,
// this is the task the equivalence test uses: a run can be replayed from the sample ids of its batches.
//
// Recipe keys. model: kind (mlp), inputs (16), hidden (64), layers (2 hidden layers), outputs (1).
//              data:  kind (regression), samples (8192), noise (0.01), seed (7), teacher_hidden (32).
// Batch tensors: [inputs (B×inputs), targets (B×outputs)].
#pragma once

#include "dedloc/train/task.hpp"

namespace dedloc::train {

struct RegressionDataOptions {
  std::int64_t inputs = 16;
  std::int64_t outputs = 1;
  std::int64_t samples = 8192;
  double noise = 0.01;
  std::uint64_t seed = 7;
  std::int64_t teacher_hidden = 32;
};

// The whole dataset, materialized (it is small).
class RegressionData {
 public:
  explicit RegressionData(const RegressionDataOptions& options);
  std::int64_t size() const { return inputs_.size(0); }
  // The samples with these ids, as a batch (ids must be < size()).
  Batch batch(const std::vector<std::uint64_t>& ids, torch::Device device) const;

 private:
  torch::Tensor inputs_, targets_;
};

struct MlpOptions {
  std::int64_t hidden = 64;
  std::int64_t layers = 2;
  RegressionDataOptions data;  // inputs and outputs are the model's keys, the rest data's
};

// Reads and checks the model: and data: sections (model.kind must be `kind`).
Result<MlpOptions> read_mlp_options(ConfigReader model, ConfigReader data, std::string_view kind = "mlp");
Result<std::unique_ptr<Task>> make_mlp_task(const MlpOptions& options, const TaskContext& context);

}  // namespace dedloc::train
