#include "dedloc/train/models/synthetic_task.hpp"

#include <chrono>
#include <cmath>
#include <sstream>
#include <thread>

namespace dedloc::train {

namespace {

class SyntheticTask : public Task {
 public:
  SyntheticTask(const SyntheticTaskOptions& options, const TaskContext& context, double samples_per_second)
      : micro_batch_size_(context.micro_batch_size),
        samples_per_second_(samples_per_second),
        // Through float, as the gradient will be: what describe() shows is what the peer applies.
        scale_(static_cast<float>(options.gradient * static_cast<double>(context.data_seed))) {
    const std::int64_t per_tensor = options.parameters / options.tensors;
    for (std::int64_t k = 0; k < options.tensors; ++k) {
      const std::int64_t size = per_tensor + (k == 0 ? options.parameters % options.tensors : 0);
      auto tensor = torch::zeros({size}, torch::TensorOptions().dtype(torch::kFloat32).device(context.device));
      parameters_.emplace_back("layer" + std::to_string(k) + ".weight", tensor.requires_grad_(true));
    }
  }

  NamedTensors named_parameters() override { return parameters_; }

  Result<Batch> next_batch() override {
    Batch batch;
    batch.sample_ids.resize(static_cast<size_t>(micro_batch_size_));
    for (auto& id : batch.sample_ids) id = next_id_++;
    return batch;
  }

  // c · Σ w: its gradient is c in every element (the header derives what the swarm then applies). The
  // backward pass adds a broadcast scalar into each .grad() in place: no gradient-sized allocation. The
  // forward pass takes batch / samples_per_second, slept.
  torch::Tensor loss(const Batch& batch) override {
    const auto begin = std::chrono::steady_clock::now();
    torch::Tensor total = parameters_.front().second.sum();
    for (size_t k = 1; k < parameters_.size(); ++k) total = total + parameters_[k].second.sum();
    auto loss = total * scale_;
    std::this_thread::sleep_until(begin + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                              std::chrono::duration<double>(static_cast<double>(batch.size()) / samples_per_second_)));
    return loss;
  }

  std::string describe() const override {
    std::int64_t count = 0;
    for (const auto& [name, tensor] : parameters_) count += tensor.numel();
    std::ostringstream text;
    text.precision(9);
    text << kSyntheticTaskKind << " (" << count << " parameters in " << parameters_.size() << " tensors, "
         << samples_per_second_ << " samples/s emulated, per-sample gradient " << scale_ << ")";
    return text.str();
  }

 private:
  NamedTensors parameters_;
  std::int64_t micro_batch_size_;
  double samples_per_second_;
  float scale_;
  std::uint64_t next_id_ = 0;
};

}  // namespace

Result<SyntheticTaskOptions> read_synthetic_options(ConfigReader model, ConfigReader data) {
  std::string kind;
  SyntheticTaskOptions options;
  model.read("kind", kind);
  model.read("parameters", options.parameters);
  model.read("tensors", options.tensors);
  model.read("samples_per_second", options.samples_per_second);
  model.read("gradient", options.gradient);
  auto bad = [](const ConfigReader& where, const std::string& what) {
    return error(Code::kInvalidArgument, where.where() + ": " + what);
  };
  if (kind != kSyntheticTaskKind) return bad(model, "kind: expected '" + std::string(kSyntheticTaskKind) + "', got '" + kind + "'");
  if (options.tensors < 1 || options.parameters < options.tensors || options.parameters > (std::int64_t{1} << 33)) {
    return bad(model, "need 1 <= tensors <= parameters <= 2^33");
  }
  if (!(options.samples_per_second > 0) || !std::isfinite(options.samples_per_second)) {
    return bad(model, "samples_per_second must be a positive number");
  }
  if (!std::isfinite(options.gradient)) return bad(model, "gradient must be a finite number");
  // The data are sample ids: a data: section would be a recipe meant for another task.
  if (!data.keys().empty()) return bad(data, "the synthetic task reads no data (remove this section)");
  return options;
}

Result<std::unique_ptr<Task>> make_synthetic_task(const SyntheticTaskOptions& options, const TaskContext& context) {
  if (context.micro_batch_size < 1) return error(Code::kInvalidArgument, "micro_batch_size must be >= 1");
  const double rate = context.samples_per_second > 0 ? context.samples_per_second : options.samples_per_second;
  return std::unique_ptr<Task>(std::make_unique<SyntheticTask>(options, context, rate));
}

}  // namespace dedloc::train
