// The collaboration plan: DeDLOC's program — who computes gradients, who aggregates which
// share, and the step rate that follows — next to the classic strategies under the same cost model.
//
// The program, in the cost model of cost_model.hpp (r steps/s, c_i ∈ {0,1} computes, x_i = w_i·r·G bytes/s
// the rate of reducer i's share):
//
//   maximize   min( Σ_i s_i c_i / B ,  Σ_i x_i / (G) )                       (steps/s)
//   subject to T_i = Σ_{j≠i} c_i x_j + Σ_{k≠i} c_k x_i ≤ min(u_i, d_i)      (what i sends = what it gets back)
//              T_ij = c_i x_j + c_j x_i ≤ t_ij                             (pairwise limits)
//              x_i = 0 for client-mode peers, c_i = 0 for peers with no compute
//
// DeDLOC writes this with a_ki (k sends to aggregator i) and g_ij (i returns to j), requiring
// g_ij ≤ min_{k: c_k=1} a_ki. We use one rate per aggregator (a_ki = g_ik = c_k·x_i): that is what butterfly
// all-reduce executes (one share per reducer, the same for every member), and the relaxation with g_ij
// free per receiver can promise rates no share vector delivers.
//
// Linearization (the MILP actually solved, on lpsolve):
//   * the outer min: an epigraph variable r with r ≤ Σ s_i c_i / B and r = Σ_i x_i / G (maximize r);
//   * the products c_k·x_i: variables z_ki ≥ 0 with z_ki ≥ x_i − M·(1 − c_k), M = an upper bound of x_i
//     (the compute-limited rate). Every z appears only on the left of a ≤, so the optimum pushes it down to
//     max(0, x_i − M(1 − c_k)) = c_k·x_i: this is the epigraph of DeDLOC's min over senders.
//   All quantities are scaled so that M = 1 (rates in units of the compute-limited step rate).
//
// Above `exact_peer_limit` peers the MILP (n² variables, n binaries) gets slow, and the plan comes from a
// heuristic search over compute sets instead; the output says which method produced it. See
// docs/planner.md. For a fixed compute set the best shares are the group program's closed form (no
// pairwise limits) or a plain LP on lpsolve (with limits).
#pragma once

#include <string>
#include <vector>

#include "dedloc/core/status.hpp"
#include "dedloc/plan/cost_model.hpp"

namespace dedloc::plan {

struct PlanOptions {
  // The largest collaboration solved exactly by the MILP; larger ones use the heuristic.
  std::size_t exact_peer_limit = 16;
  // lpsolve's time limit per solve; when it passes, the best solution found so far (or the heuristic's)
  // is used and the plan says it is not proven optimal.
  double solver_timeout_seconds = 10;
  // Give the MILP the heuristic's rate as a lower bound (a cut that prunes its search). Off only to test
  // or time the MILP on its own.
  bool seed_exact_with_heuristic = true;
  // Among plans with the same rate, make idle peers compute when that costs nothing (see the .cpp).
  bool add_harmless_compute = true;
};

enum class PlanMethod {
  kExact,            // the MILP, solved to optimality
  kExactTimedOut,    // the MILP hit its time limit: the best plan found, not proven optimal
  kHeuristic,        // more peers than exact_peer_limit
};
std::string_view method_name(PlanMethod method);

struct PeerRole {
  bool computes = false;
  double share = 0;            // w_i: fraction of the vector this peer aggregates
  double traffic_bytes = 0;    // bytes this peer sends per step (= bytes it receives)
  double send_rate = 0;        // bytes/s at the predicted step rate (= receive rate)
  double link_utilization = 0; // send_rate / min(upload, download)
};

struct CollaborationPlan {
  CostModel model;                              // the validated input the plan is for
  Assignment assignment;
  StepPrediction prediction;
  std::vector<PeerRole> roles;                  // in peer order
  PlanMethod method = PlanMethod::kExact;
  std::string method_note;                      // one line: how the plan was found
  std::vector<StrategyPrediction> strategies;   // the classic strategies, same model
};

// Errors: bad input (kInvalidArgument, naming the peer or key); kInfeasible when no plan moves any
// gradient (e.g. pairwise limits cut every computing peer off from every aggregator).
[[nodiscard]] Result<CollaborationPlan> plan_collaboration(const Collaboration& collaboration,
                                                           const PlanOptions& options = {});

// Building blocks, exposed for tests and the benchmark.
// The best assignment for a fixed compute set, honouring pairwise limits (LP on lpsolve when any).
[[nodiscard]] Result<Assignment> best_assignment_for(const CostModel& model, const std::vector<bool>& computes,
                                                     double timeout_seconds);
// The heuristic search over compute sets (see collaboration_plan.cpp).
[[nodiscard]] Result<Assignment> search_compute_sets(const CostModel& model, double timeout_seconds);

}  // namespace dedloc::plan
