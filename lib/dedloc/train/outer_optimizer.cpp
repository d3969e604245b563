#include "dedloc/train/outer_optimizer.hpp"

#include "dedloc/train/gradient_buffer.hpp"

namespace dedloc::train {

namespace {

std::span<float> floats_of(torch::Tensor& tensor) {
  return {tensor.data_ptr<float>(), static_cast<size_t>(tensor.numel())};
}

}  // namespace

OuterOptimizer::OuterOptimizer(const NamedTensors& parameters, const CollaborationOptions& options) : options_(options) {
  torch::NoGradGuard no_grad;
  const auto on_host = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCPU);
  for (const auto& [name, tensor] : parameters) {
    local_.push_back(tensor);
    outer_.emplace_back(name, tensor.detach().to(on_host, /*non_blocking=*/false, /*copy=*/true).contiguous());
    momentum_.emplace_back(name, torch::zeros(tensor.sizes(), on_host));
  }
}

void OuterOptimizer::pseudo_gradient_into(std::span<float> out) {
  size_t offset = 0;
  for (size_t i = 0; i < local_.size(); ++i) {
    auto theta = floats_of(outer_[i].second);
    auto delta = out.subspan(offset, theta.size());
    copy_to_floats(local_[i], delta);
    for (size_t k = 0; k < theta.size(); ++k) delta[k] = theta[k] - delta[k];
    offset += theta.size();
  }
}

void OuterOptimizer::apply(std::span<const float> averaged) {
  // Plain float arithmetic, one rounding per operation (this file is compiled without FMA contraction):
  // every peer, whatever its hardware, computes the same θ_outer from the same average.
  const float lr = static_cast<float>(options_.outer_lr);
  const float mu = static_cast<float>(options_.outer_momentum);
  size_t offset = 0;
  for (size_t i = 0; i < local_.size(); ++i) {
    auto theta = floats_of(outer_[i].second);
    auto m = floats_of(momentum_[i].second);
    const auto delta = averaged.subspan(offset, theta.size());
    offset += theta.size();
    for (size_t k = 0; k < theta.size(); ++k) {
      float step = delta[k];
      if (mu > 0) {
        const float scaled = mu * m[k];
        m[k] = scaled + delta[k];
        if (options_.outer_nesterov) {
          const float look_ahead = mu * m[k];
          step = delta[k] + look_ahead;
        } else {
          step = m[k];
        }
      }
      const float change = lr * step;
      theta[k] = theta[k] - change;
    }
  }
  restart_local();
}

void OuterOptimizer::restart_local() {
  for (size_t i = 0; i < local_.size(); ++i) copy_from_floats(floats_of(outer_[i].second), local_[i]);
}

void OuterOptimizer::adopt_local() {
  for (size_t i = 0; i < local_.size(); ++i) copy_to_floats(local_[i], floats_of(outer_[i].second));
}

}  // namespace dedloc::train
