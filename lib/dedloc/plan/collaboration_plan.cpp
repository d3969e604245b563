#include "dedloc/plan/collaboration_plan.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "dedloc/plan/lp_solver.hpp"

namespace dedloc::plan {
namespace {

// A rate is better only when it wins by more than this (relative): keeps the search from cycling on
// floating noise and makes the first of equal candidates win, deterministically.
constexpr double kImprovement = 1e-9;
// The MILP only looks for plans at least this close to the heuristic's (a cut that prunes its search).
constexpr double kCutSlack = 1e-7;

bool better(double rate, double than) { return rate > than * (1 + kImprovement); }

double compute_rate(const CostModel& model, const std::vector<bool>& computes) {
  double compute = 0;
  for (std::size_t i = 0; i < model.size(); ++i) {
    if (computes[i]) compute += model.peer(i).compute;
  }
  return compute / model.batch();
}

// Right-hand sides above what the left can ever reach are clamped: it changes no solution and keeps
// lpsolve's numbers near 1 when a link is many orders of magnitude faster than the others.
double clamp_capacity(double capacity, double reachable) { return std::min(capacity, 2 * reachable); }

// The LP for a fixed compute set with pairwise limits, in units where the compute-limited rate is 1:
//   maximize ρ  s.t.  ρ ≤ 1,  Σ x_i = ρ,  c_i ρ + (C − 2 c_i) x_i ≤ b_i  (the T_i of cost_model.hpp with
//   w_i = x_i/ρ),  c_a x_b + c_b x_a ≤ t_ab.
Result<Assignment> solve_fixed_compute_lp(const CostModel& model, const std::vector<bool>& computes,
                                          double timeout_seconds) {
  const std::size_t n = model.size();
  const double unit = model.gradient_bytes() * compute_rate(model, computes);  // bytes/s at ρ = 1
  const double computing = static_cast<double>(std::count(computes.begin(), computes.end(), true));
  std::vector<int> column(n, -1);  // x_i's column, for peers that can aggregate
  int columns = 1;                 // column 0 is ρ
  for (std::size_t i = 0; i < n; ++i) {
    if (model.can_aggregate(i)) column[i] = columns++;
  }
  auto lp = LinearProgram::create(columns);
  if (!lp) return lp.status();
  lp->set_bounds(0, 0, 1);
  lp->maximize(std::vector<int>{0}, std::vector<double>{1});
  {
    std::vector<int> cols{0};
    std::vector<double> coefs{-1};
    for (std::size_t i = 0; i < n; ++i) {
      if (column[i] >= 0) cols.push_back(column[i]), coefs.push_back(1);
    }
    lp->add_row(cols, coefs, RowType::kEqual, 0);
  }
  const double reachable = computing + 1;
  for (std::size_t i = 0; i < n; ++i) {
    const double c_i = computes[i] ? 1 : 0;
    std::vector<int> cols;
    std::vector<double> coefs;
    if (c_i > 0) cols.push_back(0), coefs.push_back(c_i);
    if (column[i] >= 0 && computing - 2 * c_i != 0) cols.push_back(column[i]), coefs.push_back(computing - 2 * c_i);
    if (cols.empty()) continue;
    lp->add_row(cols, coefs, RowType::kLessEqual, clamp_capacity(model.link(i) / unit, reachable));
  }
  for (const auto& limit : model.limits()) {
    std::vector<int> cols;
    std::vector<double> coefs;
    if (computes[limit.a] && column[limit.b] >= 0) cols.push_back(column[limit.b]), coefs.push_back(1);
    if (computes[limit.b] && column[limit.a] >= 0) cols.push_back(column[limit.a]), coefs.push_back(1);
    if (cols.empty()) continue;
    lp->add_row(cols, coefs, RowType::kLessEqual, clamp_capacity(limit.rate / unit, 2));
  }
  auto solution = lp->solve(timeout_seconds);
  if (!solution) return solution.status();
  const double rho = solution->values[0];
  if (!(rho > 0)) return error(Code::kInfeasible, "no share vector moves any gradient for this compute set");
  Assignment assignment{computes, std::vector<double>(n, 0.0)};
  double total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (column[i] >= 0) total += std::max(0.0, solution->values[static_cast<std::size_t>(column[i])]);
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (column[i] >= 0) assignment.shares[i] = std::max(0.0, solution->values[static_cast<std::size_t>(column[i])]) / total;
  }
  return assignment;
}

// The rate a compute set reaches with the group program's shares (pairwise limits counted by predict).
double closed_form_rate(const CostModel& model, const std::vector<bool>& computes) {
  auto assignment = balance_shares(model, computes, /*spread_compute_slack=*/true);
  return assignment ? predict(model, *assignment).steps_per_second : 0.0;
}

std::vector<std::size_t> capable_peers(const CostModel& model) {
  std::vector<std::size_t> capable;
  for (std::size_t i = 0; i < model.size(); ++i) {
    if (model.can_compute(i)) capable.push_back(i);
  }
  return capable;
}

// The outcome of the MILP: a compute set, or nothing when the heuristic's plan cannot be beaten.
struct ExactOutcome {
  std::optional<std::vector<bool>> computes;
  bool proven_optimal = false;
};

// The MILP of the header, scaled so the largest compute-limited rate is 1 (so M = 1). `at_least` (in
// steps/s) is the heuristic's rate: the cut ρ ≥ at_least prunes every branch that cannot beat it.
Result<ExactOutcome> solve_exact(const CostModel& model, double at_least, double timeout_seconds) {
  const std::size_t n = model.size();
  const auto capable = capable_peers(model);
  const double max_rate = compute_rate(model, all_capable_compute(model));
  const double unit = model.gradient_bytes() * max_rate;

  int columns = 1;  // ρ
  std::vector<int> x_col(n, -1), c_col(n, -1);
  for (std::size_t i = 0; i < n; ++i) {
    if (model.can_aggregate(i)) x_col[i] = columns++;
  }
  for (std::size_t k : capable) c_col[k] = columns++;
  // z[k][i] = c_k·x_i for a computing k and a different aggregator i.
  std::vector<std::vector<int>> z_col(n, std::vector<int>(n, -1));
  for (std::size_t k : capable) {
    for (std::size_t i = 0; i < n; ++i) {
      if (i != k && x_col[i] >= 0) z_col[k][i] = columns++;
    }
  }

  auto lp = LinearProgram::create(columns);
  if (!lp) return lp.status();
  lp->set_bounds(0, 0, 1);
  for (std::size_t k : capable) lp->set_binary(c_col[k]);
  for (std::size_t i = 0; i < n; ++i) {
    if (x_col[i] >= 0) lp->set_bounds(x_col[i], 0, 1);
    for (std::size_t k = 0; k < n; ++k) {
      if (z_col[k][i] >= 0) lp->set_bounds(z_col[k][i], 0, 1);
    }
  }
  lp->maximize(std::vector<int>{0}, std::vector<double>{1});

  {  // ρ ≤ Σ s_k c_k / B (scaled)
    std::vector<int> cols{0};
    std::vector<double> coefs{1};
    for (std::size_t k : capable) cols.push_back(c_col[k]), coefs.push_back(-model.peer(k).compute / model.batch() / max_rate);
    lp->add_row(cols, coefs, RowType::kLessEqual, 0);
  }
  {  // Σ x_i = ρ
    std::vector<int> cols{0};
    std::vector<double> coefs{-1};
    for (std::size_t i = 0; i < n; ++i) {
      if (x_col[i] >= 0) cols.push_back(x_col[i]), coefs.push_back(1);
    }
    lp->add_row(cols, coefs, RowType::kEqual, 0);
  }
  // z_ki ≥ x_i − (1 − c_k)  ⇔  z_ki − x_i − c_k ≥ −1
  for (std::size_t k : capable) {
    for (std::size_t i = 0; i < n; ++i) {
      if (z_col[k][i] < 0) continue;
      lp->add_row(std::vector<int>{z_col[k][i], x_col[i], c_col[k]}, std::vector<double>{1, -1, -1},
                  RowType::kGreaterEqual, -1);
    }
  }
  // T_i = Σ_j z_ij (i sends to aggregators j) + Σ_k z_ki (i returns its share to senders k) ≤ b_i
  const double reachable = static_cast<double>(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<int> cols;
    for (std::size_t j = 0; j < n; ++j) {
      if (z_col[i][j] >= 0) cols.push_back(z_col[i][j]);
      if (z_col[j][i] >= 0) cols.push_back(z_col[j][i]);
    }
    if (cols.empty()) continue;
    lp->add_row(cols, std::vector<double>(cols.size(), 1.0), RowType::kLessEqual,
                clamp_capacity(model.link(i) / unit, reachable));
  }
  for (const auto& limit : model.limits()) {
    std::vector<int> cols;
    if (z_col[limit.a][limit.b] >= 0) cols.push_back(z_col[limit.a][limit.b]);
    if (z_col[limit.b][limit.a] >= 0) cols.push_back(z_col[limit.b][limit.a]);
    if (cols.empty()) continue;
    lp->add_row(cols, std::vector<double>(cols.size(), 1.0), RowType::kLessEqual, clamp_capacity(limit.rate / unit, 2));
  }
  if (at_least > 0) {
    lp->add_row(std::vector<int>{0}, std::vector<double>{1}, RowType::kGreaterEqual, at_least / max_rate * (1 - kCutSlack));
  }

  auto solution = lp->solve(timeout_seconds);
  if (!solution) {
    // With the cut, infeasible means no plan beats the heuristic's: it is optimal (within kCutSlack).
    if (solution.status().code() == Code::kInfeasible && at_least > 0) return ExactOutcome{std::nullopt, true};
    if (solution.status().code() == Code::kTimeout) return ExactOutcome{std::nullopt, false};
    return solution.status();
  }
  std::vector<bool> computes(n, false);
  for (std::size_t k : capable) computes[k] = solution->values[static_cast<std::size_t>(c_col[k])] > 0.5;
  if (std::none_of(computes.begin(), computes.end(), [](bool c) { return c; })) return ExactOutcome{std::nullopt, solution->proven_optimal};
  return ExactOutcome{std::move(computes), solution->proven_optimal};
}

PeerRole role_of(const CostModel& model, const Assignment& assignment, const StepPrediction& prediction,
                 std::size_t i) {
  PeerRole role;
  role.computes = assignment.computes[i];
  role.share = assignment.shares[i];
  role.traffic_bytes = peer_traffic(model, assignment, i);
  role.send_rate = role.traffic_bytes * prediction.steps_per_second;
  role.link_utilization = role.send_rate / model.link(i);
  return role;
}

// Among compute sets with the same step rate, prefer more compute: spare compute is headroom when a
// peer leaves or slows down, and it makes ties resolve the same way on every run. Adds idle capable
// peers (fastest first) whenever that keeps the rate within kImprovement of the original.
Assignment add_harmless_compute(const CostModel& model, Assignment chosen, double timeout_seconds) {
  const double rate = predict(model, chosen).steps_per_second;
  auto idle = capable_peers(model);
  std::stable_sort(idle.begin(), idle.end(),
                   [&](std::size_t a, std::size_t b) { return model.peer(a).compute > model.peer(b).compute; });
  for (std::size_t peer : idle) {
    if (chosen.computes[peer]) continue;
    auto computes = chosen.computes;
    computes[peer] = true;
    auto candidate = best_assignment_for(model, computes, timeout_seconds);
    if (candidate && predict(model, *candidate).steps_per_second >= rate * (1 - kImprovement)) {
      chosen = std::move(*candidate);
    }
  }
  return chosen;
}

}  // namespace

std::string_view method_name(PlanMethod method) {
  switch (method) {
    case PlanMethod::kExact: return "exact";
    case PlanMethod::kExactTimedOut: return "exact-timed-out";
    case PlanMethod::kHeuristic: return "heuristic";
  }
  return "exact";
}

Result<Assignment> best_assignment_for(const CostModel& model, const std::vector<bool>& computes,
                                       double timeout_seconds) {
  if (model.limits().empty()) return balance_shares(model, computes, /*spread_compute_slack=*/true);
  return solve_fixed_compute_lp(model, computes, timeout_seconds);
}

// The heuristic. A computing peer moves at least a whole gradient per step (it sends what it does not
// reduce and gets the rest back), so a slow link disqualifies a peer from computing, whatever its
// compute; and each computing peer adds load on every reducer. So the good compute sets are mostly
// "the k best-connected" or "the k fastest" peers. We try every prefix of both orders (2n candidates,
// each evaluated in O(n) with the group program's closed form), then improve the best by single flips
// (add or drop one peer) until no flip helps. The classic strategies' compute set (every capable peer)
// is one of the candidates, so the result is never worse than they are.
Result<Assignment> search_compute_sets(const CostModel& model, double timeout_seconds) {
  const std::size_t n = model.size();
  const auto capable = capable_peers(model);
  std::vector<bool> best = all_capable_compute(model);
  double best_rate = closed_form_rate(model, best);

  auto by_link = capable;
  std::stable_sort(by_link.begin(), by_link.end(), [&](std::size_t a, std::size_t b) {
    if (model.link(a) != model.link(b)) return model.link(a) > model.link(b);
    return model.peer(a).compute > model.peer(b).compute;
  });
  auto by_compute = capable;
  std::stable_sort(by_compute.begin(), by_compute.end(), [&](std::size_t a, std::size_t b) {
    if (model.peer(a).compute != model.peer(b).compute) return model.peer(a).compute > model.peer(b).compute;
    return model.link(a) > model.link(b);
  });
  for (const auto* order : {&by_link, &by_compute}) {
    std::vector<bool> computes(n, false);
    for (std::size_t peer : *order) {
      computes[peer] = true;
      double rate = closed_form_rate(model, computes);
      if (better(rate, best_rate)) best = computes, best_rate = rate;
    }
  }

  // First-improvement local search; each pass costs O(n²) and strictly improves, so it ends.
  constexpr int kMaxPasses = 64;
  for (int pass = 0; pass < kMaxPasses; ++pass) {
    bool improved = false;
    for (std::size_t peer : capable) {
      std::vector<bool> candidate = best;
      candidate[peer] = !candidate[peer];
      if (std::none_of(candidate.begin(), candidate.end(), [](bool c) { return c; })) continue;
      double rate = closed_form_rate(model, candidate);
      if (better(rate, best_rate)) best = std::move(candidate), best_rate = rate, improved = true;
    }
    if (!improved) break;
  }

  auto assignment = best_assignment_for(model, best, timeout_seconds);
  if (model.limits().empty()) return assignment;
  // With pairwise limits the closed form ranked the candidates; the LP may favour the classic set.
  auto classic = best_assignment_for(model, all_capable_compute(model), timeout_seconds);
  if (!assignment) return classic;
  if (classic && better(predict(model, *classic).steps_per_second, predict(model, *assignment).steps_per_second)) {
    return classic;
  }
  return assignment;
}

Result<CollaborationPlan> plan_collaboration(const Collaboration& collaboration, const PlanOptions& options) {
  auto model = CostModel::create(collaboration);
  if (!model) return model.status();

  auto heuristic = search_compute_sets(*model, options.solver_timeout_seconds);
  if (!heuristic && heuristic.status().code() != Code::kInfeasible) return heuristic.status();

  CollaborationPlan plan;
  std::optional<Assignment> chosen;
  if (heuristic) chosen = *heuristic;
  const std::size_t n = model->size();
  if (n <= options.exact_peer_limit) {
    double heuristic_rate = heuristic ? predict(*model, *heuristic).steps_per_second : 0.0;
    auto exact = solve_exact(*model, options.seed_exact_with_heuristic ? heuristic_rate : 0.0,
                             options.solver_timeout_seconds);
    if (!exact) return exact.status();
    if (exact->computes) {
      auto polished = best_assignment_for(*model, *exact->computes, options.solver_timeout_seconds);
      if (polished && (!chosen || !options.seed_exact_with_heuristic ||
                       better(predict(*model, *polished).steps_per_second, heuristic_rate))) {
        chosen = *polished;
      }
    }
    plan.method = exact->proven_optimal ? PlanMethod::kExact : PlanMethod::kExactTimedOut;
    plan.method_note = exact->proven_optimal
                           ? "exact: mixed-integer program on lpsolve, solved to optimality"
                           : "exact search stopped at its time limit (" +
                                 std::to_string(static_cast<int>(std::ceil(options.solver_timeout_seconds))) +
                                 " s): the best plan found, not proven optimal";
  } else {
    plan.method = PlanMethod::kHeuristic;
    plan.method_note = "heuristic: " + std::to_string(n) + " peers is above the exact limit of " +
                       std::to_string(options.exact_peer_limit) +
                       " (search over compute sets, see docs/planner.md); not proven optimal";
  }
  if (!chosen) return error(Code::kInfeasible, "no plan moves any gradient: pairwise limits cut every computing peer off from every aggregator");
  if (options.add_harmless_compute) {
    chosen = add_harmless_compute(*model, std::move(*chosen), options.solver_timeout_seconds);
  }
  plan.prediction = predict(*model, *chosen);
  if (!(plan.prediction.steps_per_second > 0)) {
    return error(Code::kInfeasible, "no plan moves any gradient: pairwise limits cut every computing peer off from every aggregator");
  }
  plan.assignment = std::move(*chosen);
  for (std::size_t i = 0; i < n; ++i) plan.roles.push_back(role_of(*model, plan.assignment, plan.prediction, i));
  plan.strategies = predict_classic_strategies(*model);
  plan.model = std::move(*model);
  return plan;
}

}  // namespace dedloc::plan
