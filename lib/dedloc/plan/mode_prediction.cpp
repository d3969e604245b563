#include "dedloc/plan/mode_prediction.hpp"

#include <algorithm>
#include <charconv>
#include <numeric>
#include <string>

namespace dedloc::plan {

std::string_view mode_name(CollaborationMode mode) {
  return mode == CollaborationMode::kDiloco ? "diloco" : "synchronous";
}

Result<CollaborationMode> parse_mode(std::string_view text, std::string_view what) {
  if (text == "synchronous") return CollaborationMode::kSynchronous;
  if (text == "diloco") return CollaborationMode::kDiloco;
  return error(Code::kInvalidArgument,
               std::string(what) + ": unknown mode '" + std::string(text) + "' (expected synchronous or diloco)");
}

Result<std::uint64_t> parse_inner_steps(std::string_view text, std::string_view what) {
  std::uint64_t steps = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), steps);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || steps < 1) {
    return error(Code::kInvalidArgument, std::string(what) + ": '" + std::string(text) +
                                             "' is not a number of inner steps per outer step (a whole number >= 1)");
  }
  return steps;
}

double averaged_batch(const Collaboration& collaboration, const ModeOptions& mode) {
  if (mode.mode == CollaborationMode::kSynchronous) return collaboration.batch;
  return collaboration.batch * static_cast<double>(mode.inner_steps);
}

std::string_view bound_name(Bound bound) { return bound == Bound::kCompute ? "compute" : "communication"; }

Bound bound_of(const StepPrediction& prediction) {
  return prediction.bottleneck.kind == Bottleneck::Kind::kCompute ? Bound::kCompute : Bound::kCommunication;
}

double ModePrediction::swarm_upload_bytes_per_sample() const {
  return std::accumulate(upload_bytes_per_sample.begin(), upload_bytes_per_sample.end(), 0.0);
}

double ModePrediction::max_upload_bytes_per_sample() const {
  return upload_bytes_per_sample.empty()
             ? 0.0
             : *std::max_element(upload_bytes_per_sample.begin(), upload_bytes_per_sample.end());
}

Result<ModePrediction> predict_mode(const Collaboration& collaboration, const ModeOptions& mode,
                                    const PlanOptions& options) {
  if (mode.mode == CollaborationMode::kDiloco && mode.inner_steps < 1) {
    return error(Code::kInvalidArgument, "inner steps per outer step must be at least 1 (got 0)");
  }
  ModePrediction out;
  out.mode = mode;
  out.global_batch = collaboration.batch;
  out.averaged_batch = averaged_batch(collaboration, mode);
  // One averaging round moves the same G bytes in either mode; only the samples between rounds differ.
  Collaboration averaged = collaboration;
  averaged.batch = out.averaged_batch;
  auto plan = plan_collaboration(averaged, options);
  if (!plan) return plan.status();
  out.plan = std::move(*plan);
  for (const auto& role : out.plan.roles) out.upload_bytes_per_sample.push_back(role.traffic_bytes / out.averaged_batch);
  return out;
}

Result<ModeComparison> compare_modes(const Collaboration& collaboration, std::uint64_t inner_steps,
                                     const PlanOptions& options) {
  auto synchronous = predict_mode(collaboration, {CollaborationMode::kSynchronous, 1}, options);
  if (!synchronous) return synchronous.status();
  auto diloco = predict_mode(collaboration, {CollaborationMode::kDiloco, inner_steps}, options);
  if (!diloco) return diloco.status();
  return ModeComparison{std::move(*synchronous), std::move(*diloco)};
}

}  // namespace dedloc::plan
