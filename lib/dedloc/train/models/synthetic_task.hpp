// A peer whose compute is emulated, for labs of many peers on one machine (docs/recipes.md, "The synthetic
// task"): everything else — progress records, the samples estimate, matchmaking, the all-reduce with its
// codec, state downloads, client mode through relays — is the real trainer's code.
//
// The forward pass of a micro-batch of B samples takes B / samples_per_second seconds, slept rather than
// spun (dozens of such peers share a few cores). The trainer's own work per micro-batch (the backward pass
// and the accumulation: a few ms per million parameters) comes on top, as it would on real hardware, so a
// peer measures a little under its rate. Its gradient is known in closed form: with
// c = gradient × TaskContext::data_seed, the loss of a micro-batch is
//
//     loss = c · Σ_j w_j      (over every element j of every parameter tensor)
//
// so ∂loss/∂w_j = c for every element, the same for every sample. The trainer averages a peer's micro-batch
// gradients (mean of means: c again) and the swarm weights peers by samples, so a global step that averages
// peers i with s_i samples applies the gradient
//
//     ḡ_j = c̄ = Σ_i s_i·c_i / Σ_i s_i      for every element j,
//
// and with `optimizer: {kind: sgd}` (no momentum, no weight decay) at learning rate lr every element moves
// by −lr·c̄. Parameters start at 0, so after steps 1..t every element is W_t = −Σ_τ lr_τ·c̄_τ, and the
// trainer's params_norm (--params-hash) is √N·|W_t| for N parameters: a checker reads each step's c̄ from
// the difference of two consecutive norms, and each peer's s_i from its step line's "samples".
//
// Recipe keys. model: kind (synthetic), parameters (1000000; split into `tensors` tensors of nearly equal
//                     size, the remainder in the first, named layer<k>.weight), tensors (4), samples_per_second
//                     (100; dedloc-train --compute-rate overrides it per peer), gradient (2^-10: c per unit of
//                     data seed; with a power of two and seeds below 2^14, every c is exact in float32).
//              data:  none (no files; the batches are sample ids only).
#pragma once

#include <string_view>

#include "dedloc/train/task.hpp"

namespace dedloc::train {

inline constexpr std::string_view kSyntheticTaskKind = "synthetic";

struct SyntheticTaskOptions {
  std::int64_t parameters = 1000000;
  std::int64_t tensors = 4;
  double samples_per_second = 100;     // emulated compute of a peer; TaskContext::samples_per_second overrides
  double gradient = 1.0 / 1024;        // per-sample gradient of every element per unit of data seed
};

// Reads and checks the model: section (model.kind must be "synthetic") and an empty or absent data: section.
Result<SyntheticTaskOptions> read_synthetic_options(ConfigReader model, ConfigReader data);
Result<std::unique_ptr<Task>> make_synthetic_task(const SyntheticTaskOptions& options, const TaskContext& context);

}  // namespace dedloc::train
