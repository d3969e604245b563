// DiLoCo's outer loop on one peer (train/collaboration_mode.hpp): θ_outer, the parameters every peer agrees
// on after each outer step, and the outer optimizer's momentum. The model's own parameters are θ_local,
// stepped by the inner optimizer between outer steps.
//
//   pseudo_gradient_into(v)   v = θ_outer − θ_local, flattened as the gradient buffer lays parameters out
//   apply(Δ̄)                  m = μ·m + Δ̄;  θ_outer −= lr·(Δ̄ + μ·m) (Nesterov) or lr·m;  θ_local = θ_outer
//   restart_local()           θ_local = θ_outer (an outer step skipped: the inner steps are discarded)
//   adopt_local()             θ_outer = θ_local (the parameters themselves were averaged right after a step)
//
// θ_outer and the momentum are what a joiner downloads and a checkpoint keeps (the trainer registers them
// as the state's "param/" and "outer_momentum/" tensors); load a state into them, then restart_local().
// They live on the host in float32 whatever the model's device, and the outer step is plain float
// arithmetic without FMA contraction, so that peers on different hardware (a GPU among CPUs) end every
// outer step with bit-identical θ_outer: the all-reduce gives them the same average (avg/all_reduce.hpp).
#pragma once

#include <span>
#include <vector>

#include "dedloc/train/collaboration_mode.hpp"
#include "dedloc/train/task.hpp"

namespace dedloc::train {

class OuterOptimizer {
 public:
  // θ_outer starts as a copy of `parameters` (θ_local), the momentum at zero.
  OuterOptimizer(const NamedTensors& parameters, const CollaborationOptions& options);

  const NamedTensors& outer_parameters() const { return outer_; }
  const NamedTensors& momentum() const { return momentum_; }

  void pseudo_gradient_into(std::span<float> out);
  void apply(std::span<const float> averaged);
  void restart_local();
  void adopt_local();

 private:
  std::vector<torch::Tensor> local_;
  NamedTensors outer_, momentum_;
  CollaborationOptions options_;
};

}  // namespace dedloc::train
