// Synchronous or DiLoCo in the planner's cost model (docs/planner.md, "Synchronous or DiLoCo"; the modes
// themselves: train/collaboration_mode.hpp, docs/recipes.md "Collaboration modes").
//
// A synchronous run averages one gradient of G bytes per global batch B. A DiLoCo run with H inner steps
// per outer step averages one pseudo-gradient of the same G bytes per outer batch H·B, and its peers keep
// computing between outer steps. To the cost model (cost_model.hpp) a DiLoCo run is therefore the
// collaboration with batch H·B: the same compute per sample and 1/H of the traffic per sample. With every
// other term of cost_model.hpp's step rate unchanged,
//
//   samples/s = H·B · r_H = min( Σ c_i s_i ,  H · B · min_i link_i / T_i ,  H · B · min_ij t_ij / T_ij )
//
// the compute bound stays where it is and the communication bound is multiplied by H. The plan is solved
// again for H·B rather than scaled, because a cheaper network per sample can change who should compute
// (a slow-linked GPU left out of a synchronous run may pay its way under DiLoCo).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "dedloc/core/status.hpp"
#include "dedloc/plan/collaboration_plan.hpp"
#include "dedloc/plan/peer.hpp"

namespace dedloc::plan {

// The planner's own copy of the recipe's `collaboration.mode` (the planner does not link the trainer).
enum class CollaborationMode { kSynchronous, kDiloco };

std::string_view mode_name(CollaborationMode mode);  // "synchronous", "diloco"
// "synchronous" or "diloco"; kInvalidArgument naming `what` (the flag or key) otherwise.
[[nodiscard]] Result<CollaborationMode> parse_mode(std::string_view text, std::string_view what);
// A whole number of inner steps per outer step, at least 1 ("8", "500"); kInvalidArgument naming `what`.
[[nodiscard]] Result<std::uint64_t> parse_inner_steps(std::string_view text, std::string_view what);

struct ModeOptions {
  CollaborationMode mode = CollaborationMode::kSynchronous;
  std::uint64_t inner_steps = 1;  // diloco: H ≥ 1, inner steps per outer step; synchronous: ignored
};

// The batch of one averaging round: B (synchronous) or H·B (DiLoCo's outer batch).
double averaged_batch(const Collaboration& collaboration, const ModeOptions& mode);

// Which side of the step rate binds: what a faster network or faster GPUs would buy.
enum class Bound { kCompute, kCommunication };
std::string_view bound_name(Bound bound);  // "compute", "communication"
Bound bound_of(const StepPrediction& prediction);

struct ModePrediction {
  ModeOptions mode;
  double global_batch = 0;     // B, as given (--batch or the peers file)
  double averaged_batch = 0;   // samples per averaging round: B, or H·B
  CollaborationPlan plan;      // the plan for averaged_batch: its steps are averaging rounds (outer steps)
  // Per peer (in peer order): bytes it uploads per sample the swarm computes (T_i / averaged_batch; the
  // same amount arrives). Their sum is the swarm's bytes per sample, the prediction of `dedloc-avg monitor`'s.
  std::vector<double> upload_bytes_per_sample;

  double swarm_upload_bytes_per_sample() const;
  double max_upload_bytes_per_sample() const;
  Bound bound() const { return bound_of(plan.prediction); }
};

// Plans `collaboration` under `mode`. Errors: plan_collaboration's, and kInvalidArgument for H = 0.
[[nodiscard]] Result<ModePrediction> predict_mode(const Collaboration& collaboration, const ModeOptions& mode,
                                                  const PlanOptions& options = {});

// The same peers synchronous and under DiLoCo with `inner_steps` inner steps per outer step.
struct ModeComparison {
  ModePrediction synchronous;
  ModePrediction diloco;
};
[[nodiscard]] Result<ModeComparison> compare_modes(const Collaboration& collaboration, std::uint64_t inner_steps,
                                                   const PlanOptions& options = {});

}  // namespace dedloc::plan
