#include "dedloc/train/outer_optimizer.hpp"

#include "dedloc/train/gradient_buffer.hpp"

namespace dedloc::train {

OuterOptimizer::OuterOptimizer(const NamedTensors& parameters, const CollaborationOptions& options) : options_(options) {
  torch::NoGradGuard no_grad;
  for (const auto& [name, tensor] : parameters) {
    local_.push_back(tensor);
    outer_.emplace_back(name, tensor.detach().clone());
    momentum_.emplace_back(name, torch::zeros_like(tensor));
  }
}

void OuterOptimizer::pseudo_gradient_into(std::span<float> out) const {
  torch::NoGradGuard no_grad;
  size_t offset = 0;
  for (size_t i = 0; i < local_.size(); ++i) {
    const auto n = static_cast<size_t>(local_[i].numel());
    copy_to_floats(outer_[i].second - local_[i], out.subspan(offset, n));
    offset += n;
  }
}

void OuterOptimizer::apply(std::span<const float> averaged) {
  torch::NoGradGuard no_grad;
  size_t offset = 0;
  for (size_t i = 0; i < local_.size(); ++i) {
    auto& theta = outer_[i].second;
    auto& m = momentum_[i].second;
    const auto n = static_cast<size_t>(theta.numel());
    auto delta = torch::empty_like(theta);
    copy_from_floats(averaged.subspan(offset, n), delta);
    offset += n;
    if (options_.outer_momentum > 0) {
      m.mul_(options_.outer_momentum).add_(delta);
      if (options_.outer_nesterov) {
        delta.add_(m, options_.outer_momentum);
      } else {
        delta = m;
      }
    }
    theta.sub_(delta, options_.outer_lr);
  }
  restart_local();
}

void OuterOptimizer::restart_local() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < local_.size(); ++i) local_[i].copy_(outer_[i].second);
}

void OuterOptimizer::adopt_local() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < local_.size(); ++i) outer_[i].second.copy_(local_[i]);
}

}  // namespace dedloc::train
