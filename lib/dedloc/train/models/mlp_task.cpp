#include "dedloc/train/models/mlp_task.hpp"

#include <numeric>
#include <random>

#include "dedloc/train/prefetcher.hpp"

namespace dedloc::train {

RegressionData::RegressionData(const RegressionDataOptions& o) {
  torch::NoGradGuard no_grad;
  auto generator = at::detail::createCPUGenerator(o.seed);
  inputs_ = at::randn({o.samples, o.inputs}, generator);
  auto w1 = at::randn({o.inputs, o.teacher_hidden}, generator) / std::sqrt(static_cast<double>(o.inputs));
  auto w2 = at::randn({o.teacher_hidden, o.outputs}, generator) / std::sqrt(static_cast<double>(o.teacher_hidden));
  targets_ = torch::tanh(inputs_.mm(w1)).mm(w2) + o.noise * at::randn({o.samples, o.outputs}, generator);
}

Batch RegressionData::batch(const std::vector<std::uint64_t>& ids, torch::Device device) const {
  std::vector<std::int64_t> index(ids.begin(), ids.end());
  auto rows = torch::tensor(index, torch::kLong);
  return Batch{{inputs_.index_select(0, rows).to(device), targets_.index_select(0, rows).to(device)}, ids};
}

namespace {

class MlpTask : public Task {
 public:
  MlpTask(std::int64_t inputs, std::int64_t hidden, std::int64_t layers, std::int64_t outputs,
          const RegressionDataOptions& data, const TaskContext& context)
      : context_(context), data_(data) {
    torch::manual_seed(context.init_seed);  // identical initial parameters on every peer
    std::int64_t width = inputs;
    for (std::int64_t i = 0; i < layers; ++i) {
      model_->push_back(torch::nn::Linear(width, hidden));
      model_->push_back(torch::nn::Tanh());
      width = hidden;
    }
    model_->push_back(torch::nn::Linear(width, outputs));
    model_->to(context.device);
    order_.resize(static_cast<size_t>(data_.size()));
    position_ = order_.size();  // used up: the first batch draws a permutation
    rng_.seed(context.data_seed);
    prefetcher_ = std::make_unique<Prefetcher<Batch>>(4, [this] { return make_batch(); });
  }

  NamedTensors named_parameters() override {
    NamedTensors out;
    for (const auto& item : model_->named_parameters()) out.emplace_back(item.key(), item.value());
    return out;
  }
  Result<Batch> next_batch() override { return prefetcher_->next(); }
  torch::Tensor loss(const Batch& batch) override {
    return torch::mse_loss(model_->forward(batch.tensors.at(0)), batch.tensors.at(1));
  }
  std::string describe() const override {
    std::int64_t count = 0;
    for (const auto& p : model_->parameters()) count += p.numel();
    return "mlp (" + std::to_string(count) + " parameters) on " + std::to_string(data_.size()) + " regression samples";
  }

 private:
  // Runs on the prefetch thread: the next micro-batch in this peer's order.
  Result<Batch> make_batch() {
    std::vector<std::uint64_t> ids;
    while (static_cast<std::int64_t>(ids.size()) < context_.micro_batch_size) {
      if (position_ == order_.size()) {
        std::iota(order_.begin(), order_.end(), std::uint64_t{0});
        std::shuffle(order_.begin(), order_.end(), rng_);
        position_ = 0;
      }
      ids.push_back(order_[position_++]);
    }
    return data_.batch(ids, context_.device);
  }

  TaskContext context_;
  RegressionData data_;
  torch::nn::Sequential model_;
  std::vector<std::uint64_t> order_;
  size_t position_ = 0;
  std::mt19937_64 rng_;
  std::unique_ptr<Prefetcher<Batch>> prefetcher_;  // last: stopped before what it reads
};

}  // namespace

Result<MlpOptions> read_mlp_options(ConfigReader model, ConfigReader data, std::string_view kind) {
  std::string model_kind, data_kind;
  MlpOptions options;
  auto& d = options.data;
  model.read("kind", model_kind);
  model.read("inputs", d.inputs);
  model.read("hidden", options.hidden);
  model.read("layers", options.layers);
  model.read("outputs", d.outputs);
  data.read("kind", data_kind);
  data.read("samples", d.samples);
  data.read("noise", d.noise);
  data.read("seed", d.seed);
  data.read("teacher_hidden", d.teacher_hidden);
  auto bad = [](const ConfigReader& where, const std::string& what) {
    return error(Code::kInvalidArgument, where.where() + ": " + what);
  };
  if (model_kind != kind) return bad(model, "kind: expected '" + std::string(kind) + "', got '" + model_kind + "'");
  if (data_kind != "regression") return bad(data, "kind: the mlp model trains on 'regression' data, got '" + data_kind + "'");
  if (d.inputs < 1 || d.outputs < 1 || options.hidden < 1 || options.layers < 0 || options.layers > 64) {
    return bad(model, "inputs, outputs, hidden must be >= 1 and layers in [0, 64]");
  }
  if (d.samples < 1 || d.samples > (1 << 24) || d.teacher_hidden < 1 || d.noise < 0) return bad(data, "samples in [1, 2^24], teacher_hidden >= 1, noise >= 0");
  return options;
}

Result<std::unique_ptr<Task>> make_mlp_task(const MlpOptions& o, const TaskContext& context) {
  if (context.micro_batch_size < 1) return error(Code::kInvalidArgument, "micro_batch_size must be >= 1");
  return std::unique_ptr<Task>(std::make_unique<MlpTask>(o.data.inputs, o.hidden, o.layers, o.data.outputs, o.data, context));
}

}  // namespace dedloc::train
