// The gradients of one global step (docs/architecture.md): per-parameter accumulators that sum the
// micro-batches' gradients, and the flat float vector that averaging works on and the optimizer reads back.
//
// The vector is allocated once. Between steps it is free, and parameter averaging borrows it (parameters
// have the gradients' layout and schema).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dedloc/avg/averager.hpp"
#include "dedloc/avg/training_state.hpp"
#include "dedloc/train/task.hpp"

namespace dedloc::train {

class GradientBuffer {
 public:
  // `schema_prefix` goes before every name in the schema hash: vectors of another meaning (DiLoCo's
  // pseudo-gradients) get a schema of their own, so peers never average them with gradients.
  explicit GradientBuffer(const NamedTensors& parameters, std::string_view schema_prefix = "");

  const avg::VectorSchema& schema() const { return schema_; }
  std::span<float> values() { return vector_; }
  const std::vector<torch::Tensor>& parameters() const { return parameters_; }

  // Adds the parameters' gradients of one micro-batch (clipped to a norm of max_grad_norm when > 0), then
  // zeroes them. `batch` counts toward samples() and its ids toward sample_ids() (when keep_ids).
  void add_micro_batch(const Batch& batch, double max_grad_norm, bool keep_ids);
  // Zeroes the parameters' gradients without adding them (a micro-batch dropped for its loss).
  void drop_micro_batch();
  std::uint64_t micro_steps() const { return micro_steps_; }
  // What the accumulators hold: micro-steps and samples since clear() or the last restart_accumulation().
  std::uint64_t accumulated_micro_steps() const { return accumulated_micro_steps_; }
  std::uint64_t accumulated_samples() const { return accumulated_samples_; }
  std::uint64_t samples() const { return samples_; }
  const std::vector<std::uint64_t>& sample_ids() const { return sample_ids_; }

  // Divides the accumulators by their micro-steps (each micro-step's loss is a mean over its batch already)
  // and writes the mean into the vector.
  void take_mean();
  // The accumulated mean into the vector again (a failed round may have left it half-averaged).
  void restore_mean();
  bool finite() const;
  // The vector into the parameters' gradients, for the optimizer.
  void write_gradients();
  // Starts the next step: accumulators, the parameters' gradients, the counts.
  void clear();
  // Empties the accumulators but keeps the step's counts and sample ids: a DiLoCo inner step has used them
  // and the outer step goes on (train/collaboration_mode.hpp).
  void restart_accumulation();

  // Parameter averaging: the parameters into the vector, and the vector back into them.
  void read_parameters();
  void write_parameters();

 private:
  std::vector<torch::Tensor> parameters_, accumulators_;
  avg::VectorSchema schema_;
  std::vector<float> vector_;
  std::uint64_t micro_steps_ = 0, samples_ = 0;
  std::uint64_t accumulated_micro_steps_ = 0, accumulated_samples_ = 0;
  std::vector<std::uint64_t> sample_ids_;
};

// One tensor (any device) to and from float32 elements on the host.
void copy_to_floats(const torch::Tensor& tensor, std::span<float> out);
void copy_from_floats(std::span<const float> in, const torch::Tensor& tensor);
std::vector<std::uint64_t> shape_of(const torch::Tensor& tensor);

}  // namespace dedloc::train
