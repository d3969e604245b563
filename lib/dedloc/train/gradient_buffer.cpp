#include "dedloc/train/gradient_buffer.hpp"

#include <cmath>

namespace dedloc::train {

namespace {

// Tensors back to back in a flat buffer, in order, and back.
void flatten_into(const std::vector<torch::Tensor>& tensors, std::span<float> out) {
  size_t offset = 0;
  for (const auto& t : tensors) {
    copy_to_floats(t, out.subspan(offset, static_cast<size_t>(t.numel())));
    offset += static_cast<size_t>(t.numel());
  }
}

void unflatten_from(std::span<const float> in, const std::vector<torch::Tensor>& tensors) {
  size_t offset = 0;
  for (const auto& t : tensors) {
    copy_from_floats(in.subspan(offset, static_cast<size_t>(t.numel())), t);
    offset += static_cast<size_t>(t.numel());
  }
}

}  // namespace

std::vector<std::uint64_t> shape_of(const torch::Tensor& tensor) {
  std::vector<std::uint64_t> shape;
  for (auto d : tensor.sizes()) shape.push_back(static_cast<std::uint64_t>(d));
  return shape;
}

void copy_to_floats(const torch::Tensor& tensor, std::span<float> out) {
  torch::from_blob(out.data(), {tensor.numel()}, torch::kFloat32).copy_(tensor.detach().reshape({-1}).to(torch::kCPU, torch::kFloat32));
}

void copy_from_floats(std::span<const float> in, const torch::Tensor& tensor) {
  torch::NoGradGuard no_grad;
  tensor.copy_(torch::from_blob(const_cast<float*>(in.data()), tensor.sizes(), torch::kFloat32));
}

GradientBuffer::GradientBuffer(const NamedTensors& parameters, std::string_view schema_prefix) {
  std::vector<avg::TensorSpec> specs;
  std::uint64_t length = 0;
  for (const auto& [name, tensor] : parameters) {
    parameters_.push_back(tensor);
    accumulators_.push_back(torch::zeros_like(tensor));
    specs.push_back({std::string(schema_prefix) + name, shape_of(tensor)});
    length += static_cast<std::uint64_t>(tensor.numel());
  }
  schema_ = {avg::schema_hash(specs), length};
  vector_.assign(length, 0.0f);
}

void GradientBuffer::add_micro_batch(const Batch& batch, double max_grad_norm, bool keep_ids) {
  torch::NoGradGuard no_grad;
  if (max_grad_norm > 0) torch::nn::utils::clip_grad_norm_(parameters_, max_grad_norm);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    auto& grad = parameters_[i].mutable_grad();
    if (!grad.defined()) continue;  // a parameter this batch did not reach
    accumulators_[i].add_(grad);
    grad.zero_();
  }
  ++micro_steps_;
  ++accumulated_micro_steps_;
  samples_ += static_cast<std::uint64_t>(batch.size());
  accumulated_samples_ += static_cast<std::uint64_t>(batch.size());
  if (keep_ids) sample_ids_.insert(sample_ids_.end(), batch.sample_ids.begin(), batch.sample_ids.end());
}

void GradientBuffer::drop_micro_batch() {
  for (auto& parameter : parameters_) {
    if (parameter.mutable_grad().defined()) parameter.mutable_grad().zero_();
  }
}

void GradientBuffer::take_mean() {
  for (auto& a : accumulators_) a.div_(static_cast<double>(std::max<std::uint64_t>(1, accumulated_micro_steps_)));
  flatten_into(accumulators_, vector_);
}

void GradientBuffer::restore_mean() { flatten_into(accumulators_, vector_); }

bool GradientBuffer::finite() const {
  for (float v : vector_) {
    if (!std::isfinite(v)) return false;
  }
  return true;
}

void GradientBuffer::write_gradients() {
  std::vector<torch::Tensor> grads;
  for (auto& parameter : parameters_) {
    if (!parameter.mutable_grad().defined()) parameter.mutable_grad() = torch::zeros_like(parameter);
    grads.push_back(parameter.mutable_grad());
  }
  unflatten_from(vector_, grads);
}

void GradientBuffer::clear() {
  for (auto& a : accumulators_) a.zero_();
  drop_micro_batch();
  micro_steps_ = samples_ = 0;
  accumulated_micro_steps_ = accumulated_samples_ = 0;
  sample_ids_.clear();
}

void GradientBuffer::restart_accumulation() {
  for (auto& a : accumulators_) a.zero_();
  accumulated_micro_steps_ = accumulated_samples_ = 0;
}

void GradientBuffer::read_parameters() {
  torch::NoGradGuard no_grad;
  flatten_into(parameters_, vector_);
}

void GradientBuffer::write_parameters() {
  torch::NoGradGuard no_grad;
  unflatten_from(vector_, parameters_);
}

}  // namespace dedloc::train
