#include "dedloc/plan/group_shares.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace dedloc::plan {
namespace {

// Member indices sorted by (role, bandwidth): sums taken in this order do not depend on the input order,
// because members that compare equal carry equal values.
std::vector<std::size_t> canonical_order(std::span<const GroupMember> members) {
  std::vector<std::size_t> order(members.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (members[a].role != members[b].role) return members[a].role < members[b].role;
    return members[a].bandwidth < members[b].bandwidth;
  });
  return order;
}

Status check_members(std::span<const GroupMember> members) {
  if (members.empty()) return error(Code::kInvalidArgument, "group program: the group has no members");
  bool any_sender = false;
  bool any_reducer = false;
  for (const auto& m : members) {
    if (!(m.bandwidth > 0) || !std::isfinite(m.bandwidth)) {
      return error(Code::kInvalidArgument, "group program: member '" + m.id + "' has bandwidth " +
                                               std::to_string(m.bandwidth) + " (must be a finite value > 0)");
    }
    any_sender |= m.role != MemberRole::kAux;
    any_reducer |= m.role != MemberRole::kClient;
  }
  if (!any_sender) return error(Code::kInvalidArgument, "group program: no member sends a vector (all are auxiliary)");
  if (!any_reducer) {
    return error(Code::kInvalidArgument, "group program: no member can reduce (all are client-mode)");
  }
  return Status::ok();
}

}  // namespace

Result<GroupProgramSolution> solve_group_program(std::span<const GroupMember> members, double min_xi) {
  DEDLOC_RETURN_IF_ERROR(check_members(members));
  const auto order = canonical_order(members);

  double senders = 0;      // n_s
  double nodes = 0;        // m
  double node_bandwidth = 0;
  double aux_bandwidth = 0;
  double xi_lo = 0;        // every sender moves at least one whole vector
  for (std::size_t i : order) {
    const auto& m = members[i];
    if (m.role != MemberRole::kAux) {
      senders += 1;
      xi_lo = std::max(xi_lo, 1.0 / m.bandwidth);
    }
    if (m.role == MemberRole::kNode) {
      nodes += 1;
      node_bandwidth += m.bandwidth;
    }
    if (m.role == MemberRole::kAux) aux_bandwidth += m.bandwidth;
  }

  GroupProgramSolution solution;
  solution.weights.assign(members.size(), 0.0);

  // A lone sender that reduces keeps its whole vector: nothing moves.
  if (senders == 1 && nodes == 1) {
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (members[i].role == MemberRole::kNode) solution.weights[i] = 1.0;
    }
    solution.xi = std::max(0.0, min_xi);
    return solution;
  }

  // The root of Σ cap_i(ξ) = 1 (see the header); with n_s = 2 nodes absorb any share at constant traffic.
  double xi_lin = 0;
  if (senders >= 3) {
    xi_lin = (senders - 2 + nodes) / (node_bandwidth + (senders - 2) / senders * aux_bandwidth);
  } else if (nodes == 0) {
    xi_lin = senders / aux_bandwidth;
  }
  solution.xi = std::max({xi_lin, xi_lo, min_xi});

  const double xi = solution.xi;
  auto cap = [&](const GroupMember& m) {
    switch (m.role) {
      case MemberRole::kClient: return 0.0;
      case MemberRole::kAux: return xi * m.bandwidth / senders;
      case MemberRole::kNode: return senders >= 3 ? std::max(0.0, (xi * m.bandwidth - 1) / (senders - 2)) : 1.0;
    }
    return 0.0;
  };
  double total_cap = 0;
  for (std::size_t i : order) total_cap += cap(members[i]);
  if (!(total_cap > 0)) {
    // Only reachable when every reducer's cap is 0 at ξ, which the root above excludes; kept as a value.
    return error(Code::kInfeasible, "group program: no reducer has capacity left");
  }
  for (std::size_t i = 0; i < members.size(); ++i) solution.weights[i] = cap(members[i]) / total_cap;
  return solution;
}

std::vector<std::uint64_t> round_shares(std::span<const GroupMember> members, std::span<const double> weights,
                                        std::uint64_t total) {
  const std::size_t n = members.size();
  std::vector<std::uint64_t> counts(n, 0);
  if (total == 0) return counts;
  auto reducer = [&](std::size_t i) { return members[i].role != MemberRole::kClient; };

  // Sum in ascending weight order: equal weights are equal values, so the sum ignores input order.
  std::vector<std::size_t> by_weight(n);
  std::iota(by_weight.begin(), by_weight.end(), 0);
  std::sort(by_weight.begin(), by_weight.end(), [&](std::size_t a, std::size_t b) { return weights[a] < weights[b]; });
  double weight_sum = 0;
  for (std::size_t i : by_weight) {
    if (reducer(i) && weights[i] > 0) weight_sum += weights[i];
  }
  // Without any positive weight, every reducer counts equally.
  auto weight = [&](std::size_t i) {
    if (!reducer(i)) return 0.0;
    return weight_sum > 0 ? std::max(0.0, weights[i]) : 1.0;
  };
  double normalizer = 0;
  if (weight_sum > 0) {
    normalizer = weight_sum;
  } else {
    for (std::size_t i = 0; i < n; ++i) normalizer += weight(i);
  }

  std::vector<double> remainder(n, -1.0);
  std::vector<std::size_t> rank;
  std::uint64_t assigned = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!reducer(i)) continue;
    double quota = weight(i) / normalizer * static_cast<double>(total);
    double whole = std::floor(quota);
    counts[i] = static_cast<std::uint64_t>(whole);
    remainder[i] = quota - whole;
    assigned += counts[i];
    rank.push_back(i);
  }
  if (rank.empty()) return counts;

  // Largest remainders first; ties to higher bandwidth, then smaller id, then earlier position.
  std::sort(rank.begin(), rank.end(), [&](std::size_t a, std::size_t b) {
    if (remainder[a] != remainder[b]) return remainder[a] > remainder[b];
    if (members[a].bandwidth != members[b].bandwidth) return members[a].bandwidth > members[b].bandwidth;
    if (members[a].id != members[b].id) return members[a].id < members[b].id;
    return a < b;
  });
  // The floors leave fewer than n elements over (a few more or less only through floating error).
  for (std::size_t k = 0; assigned < total; k = (k + 1) % rank.size()) {
    counts[rank[k]] += 1;
    assigned += 1;
  }
  for (std::size_t k = 0; assigned > total; k = (k + 1) % rank.size()) {
    std::size_t i = rank[rank.size() - 1 - k];
    if (counts[i] > 0) {
      counts[i] -= 1;
      assigned -= 1;
    }
  }
  return counts;
}

Result<std::vector<std::uint64_t>> plan_group_shares(std::span<const GroupMember> members,
                                                     std::uint64_t vector_length) {
  auto solution = solve_group_program(members);
  if (!solution) return solution.status();
  return round_shares(members, solution->weights, vector_length);
}

Result<std::vector<std::uint64_t>> equal_group_shares(std::span<const GroupMember> members,
                                                      std::uint64_t vector_length) {
  DEDLOC_RETURN_IF_ERROR(check_members(members));
  double reducers = 0;
  for (const auto& m : members) reducers += m.role != MemberRole::kClient ? 1 : 0;
  std::vector<double> weights;
  for (const auto& m : members) weights.push_back(m.role != MemberRole::kClient ? 1 / reducers : 0.0);
  return round_shares(members, weights, vector_length);
}

}  // namespace dedloc::plan
