// Optimizers for collaborative large-batch training: SGD, LAMB and LARS/LARC (docs/recipes.md).
//
// The swarm averages the gradients of a global batch of thousands of samples, then every peer applies the
// same step to its own copy of the parameters. Batches that large need a layer-wise trust ratio to train
// stably: LAMB for transformers (the hivemind ALBERT recipe), SGD with LARS for SwAV. The averaged
// gradient sits in each parameter's .grad(); step(lr) applies one update in place, with the learning rate
// given by the schedule (schedule.hpp), so an optimizer holds no notion of time beyond its step counter.
//
// The statistics are allocated at construction, so that what a state download carries has one fixed schema
// from the start; a joiner loads a donor's state by copying into the tensors state() returns.
//
// Update rules, per parameter w with gradient g at learning rate lr. "decay" is weight_decay (λ) for the
// parameters that decays() accepts and 0 for the others (biases, LayerNorm/BatchNorm weights):
//
//   sgd    torch.optim.SGD with dampening 0, exactly (the same tensor operations in the same order):
//            d = g + decay·w
//            momentum > 0:  b = momentum·b + d;  d = nesterov ? d + momentum·b : b
//            w = w − lr·d
//          (torch's first step sets b = d; b starts at 0 here, and 0·momentum + d is that same d.)
//
//   lamb   You et al. 2019, "Large Batch Optimization for Deep Learning", Algorithm 2, with t the step
//          counter after its increment:
//            m = β1·m + (1 − β1)·g,   v = β2·v + (1 − β2)·g²
//            bias_correction:  m̂ = m / (1 − β1^t),  v̂ = v / (1 − β2^t)    (else m̂ = m, v̂ = v)
//            u = m̂ / (√v̂ + ε) + decay·w
//            r = ‖w‖ / ‖u‖  (1 when either norm is 0),  then r = min(r, max_trust_ratio) unless that is 0
//            w = w − lr·r·u
//          The trust ratio also applies to the parameters without weight decay, as in the paper and in
//          torch_optimizer.Lamb (which hivemind's ALBERT example uses); lamb_exclude_no_decay = true gives
//          them r = 1 instead, as NVIDIA apex's FusedLAMB does by default (use_nvlamb=False).
//          Unlike torch_optimizer.Lamb, which folds the bias correction into the step size (so ε meets the
//          uncorrected √v) and clamps ‖w‖ (its clamp_value), this is the paper's form: ε is added to the
//          bias-corrected √v̂, and the ratio is what max_trust_ratio clamps.
//
//   lars   SGD with momentum on a layer-wise scaled gradient, as apex's LARC wrapper that SwAV uses:
//            d = g + decay·w
//            adapted parameters (all, or with lars_exclude_no_decay only those decays() accepts):
//              local = η·‖w‖ / (‖g‖ + decay·‖w‖)     (1 when ‖w‖ = 0 or the denominator is 0)
//              lars_clip (LARC):  local = min(local / lr, 1)   (1 when lr = 0), so that the step
//                                 lr·local = min(η·‖w‖/(…), lr) never exceeds the schedule's rate
//              d = local·d
//            momentum > 0:  b = momentum·b + d;  d = b
//            w = w − lr·d
//          η is trust_coefficient. Unlike apex, whose LARC adds no weight decay at all when ‖w‖ or ‖g‖ is 0
//          and puts an ε of 1e-8 in the denominator, the formula above holds for every norm. The defaults
//          (clip, no adaptation of biases and norms) follow the LARS recipes of SimCLR/BYOL; SwAV's own
//          setting is momentum 0.9, weight_decay 1e-6 on every parameter, lars_clip false and
//          lars_exclude_no_decay false.
//
// Parameters without a gradient (an undefined .grad()) are skipped, as torch does; the step counter still
// counts the step.
//
// State, in this order (names are "<statistic>/<parameter name>"):
//   sgd, lars    "momentum_buffer/<p>" for each parameter when momentum > 0
//   lamb         "exp_avg/<p>" and "exp_avg_sq/<p>" for each parameter (m and v)
//   all          "step": the steps taken, a float32 tensor of shape {1} on the CPU (exact up to 2^24 steps)
// Statistics have their parameter's shape, dtype and device.
//
// Cost: step() allocates no tensor storage; it uses one scratch buffer per device and dtype, as large as the
// largest parameter. LAMB and LARS read two norms per parameter back to the host (one synchronization per
// parameter on a GPU).
//
// Thread-safety: none; one thread steps, and nothing else may use the parameters or the state meanwhile.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "dedloc/core/config.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/train/task.hpp"

namespace dedloc::train {

struct OptimizerOptions {
  std::string kind = "sgd";            // sgd | lamb | lars
  double momentum = 0;                 // sgd, lars: in [0, 1)
  bool nesterov = false;               // sgd: Nesterov momentum (needs momentum > 0)
  double weight_decay = 0;             // ≥ 0; applied only to parameters the decays() predicate accepts
  double beta1 = 0.9, beta2 = 0.999;   // lamb: moment decay rates, in [0, 1)
  double epsilon = 1e-6;               // lamb: added to √v̂; > 0
  bool bias_correction = true;         // lamb: divide the moments by (1 − β^t)
  double max_trust_ratio = 10;         // lamb: clamp of ‖w‖/‖update‖ (0: no clamp); ≥ 0
  bool lamb_exclude_no_decay = false;  // lamb: trust ratio 1 for parameters decays() rejects (apex's default)
  double trust_coefficient = 0.001;    // lars: η; > 0
  bool lars_clip = true;               // lars: LARC clipping, local lr = min(η·‖w‖/(‖g‖ + λ·‖w‖)/lr, 1)
  bool lars_exclude_no_decay = true;   // lars: no adaptation on parameters decays() rejects (bias, BN)
};

// Reads the keys of an "optimizer:" section into `options`: "kind" first, then weight_decay and the keys
// of that kind (the comments above: momentum and nesterov for sgd; beta1, beta2, epsilon, bias_correction,
// max_trust_ratio and lamb_exclude_no_decay for lamb; momentum, trust_coefficient, lars_clip and
// lars_exclude_no_decay for lars). A key of another kind is left unread, so the root's finish() reports it
// as unknown rather than let "beta1" under an sgd optimizer be silently ignored.
void read_optimizer_options(ConfigReader& section, OptimizerOptions& options);

// kInvalidArgument naming the bad key ("optimizer.momentum must be in [0, 1) (got 1.5)").
Status check_optimizer_options(const OptimizerOptions& options);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One step with the parameters' current .grad() (already averaged over the swarm) at learning rate lr
  // (≥ 0). The gradients are read, never changed.
  virtual void step(double lr) = 0;
  // The optimizer's statistics (the "State" list above), all allocated at construction, so that their
  // names and shapes never change. The tensors are the live ones: loading a state is copying into them.
  virtual NamedTensors state() = 0;
  // For logs: "lamb(beta1=0.9, beta2=0.999, epsilon=1e-06, weight_decay=0.01 on 12 of 20 parameters, ...)".
  virtual std::string describe() const = 0;
};

// An optimizer of `options.kind` over `parameters` (the tensors themselves, which step() updates in place).
// `decays(name)` says which parameters take weight decay (Task::decays); an empty function means all.
// Errors (kInvalidArgument): check_optimizer_options, no parameters, a repeated name, an undefined or
// non-floating-point parameter.
Result<std::unique_ptr<Optimizer>> make_optimizer(const OptimizerOptions& options, NamedTensors parameters,
                                                  std::function<bool(const std::string&)> decays);

}  // namespace dedloc::train
