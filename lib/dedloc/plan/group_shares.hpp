// The group program: how one averaging group splits its vector among reducers (docs/planner.md).
//
// A group of n members averages a vector of L values. Member i reduces a fraction w_i of it: every
// sender streams w_i·L values to i and gets w_i·L averaged values back. Per value of the vector, and with
// sends and receives overlapped (pipelined), member i moves in each direction
//
//   node   (sends and reduces):  (1 − w_i)  +  (n_s − 1)·w_i  =  1 + (n_s − 2)·w_i
//   client (sends, never reduces, w_i = 0):                     1
//   aux    (reduces, never sends):           n_s·w_i
//
// where n_s is the number of senders (nodes + clients). With b_i its bandwidth (bytes/s, the smaller of
// upload and download) the round takes ξ·L·(bytes per value) seconds, where hivemind's program is
//
//   minimize ξ   s.t.  ξ·b_i ≥ traffic_i(w)  for all i,   Σ w_i = 1,   w ≥ 0,   w_i = 0 for clients.
//
// It is solved in closed form, not by a general LP solver. For ξ ≥ ξ_lo = max over senders of 1/b_i
// (a sender moves at least one full vector whatever the shares), each reducer's largest feasible share
// is linear in ξ:
//
//   cap_i(ξ) = (ξ·b_i − 1)/(n_s − 2)  for a node (n_s ≥ 3),      cap_i(ξ) = ξ·b_i/n_s  for aux,
//
// so Σ cap_i(ξ) = 1 has the single root ξ_lin = (n_s − 2 + m)/(Σ_nodes b_i + (n_s − 2)/n_s · Σ_aux b_i)
// (m = number of nodes), and the optimum is ξ* = max(ξ_lin, ξ_lo). (n_s = 2: a node's traffic is 1
// whatever its share; n_s = 1 with a node: it keeps the whole vector.) When ξ_lo binds, many share
// vectors are optimal; we take w_i = cap_i(ξ*)/Σ cap, which leaves every reducer the same relative
// headroom. O(n), exact, and free of solver tolerances: tests check it against lpsolve's LP.
//
// Determinism: every sum runs over the members in a canonical order (sorted by role and bandwidth), so the
// same members in any input order give bit-identical shares; the integer rounding breaks ties by
// bandwidth, then id. The group leader computes this once and broadcasts it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dedloc/core/status.hpp"

namespace dedloc::plan {

enum class MemberRole {
  kNode,    // sends its vector and reduces a share
  kClient,  // sends its vector, never reduces (client mode, behind NAT)
  kAux,     // reduces a share, sends nothing (CPU-only auxiliary peer, weight 0)
};

struct GroupMember {
  std::string id;          // stable identity (e.g. the PeerID); only breaks rounding ties
  double bandwidth = 0.0;  // bytes/s (min of upload and download); must be > 0
  MemberRole role = MemberRole::kNode;
};

struct GroupProgramSolution {
  // Seconds per byte of the vector: the round takes xi × (vector bytes). 0 when nothing moves (a lone
  // node keeps its whole vector).
  double xi = 0.0;
  std::vector<double> weights;  // w_i in input order; Σ = 1, 0 for clients
};

// Solves the group program. `min_xi` raises ξ to a floor (e.g. when compute, not the network, limits the
// step): the shares then spread the slack evenly. Errors: no member, a non-positive or non-finite
// bandwidth, no sender, no member able to reduce.
[[nodiscard]] Result<GroupProgramSolution> solve_group_program(std::span<const GroupMember> members,
                                                               double min_xi = 0.0);

// The same program as a general LP on lpsolve: the reference the closed form is tested and benchmarked
// against. Returns ξ and one optimal w (which of the optimal share vectors depends on the solver).
[[nodiscard]] Result<GroupProgramSolution> solve_group_program_lp(std::span<const GroupMember> members,
                                                                  double timeout_seconds = 10);

// Rounds shares to whole element counts summing exactly to `total` (largest remainder: floors first,
// then one more element to the largest fractional parts; ties to the higher bandwidth, then the smaller
// id, then the earlier input position). Clients always get 0.
[[nodiscard]] std::vector<std::uint64_t> round_shares(std::span<const GroupMember> members,
                                                      std::span<const double> weights, std::uint64_t total);

// What the averaging code calls: the element count each member reduces, in input order.
[[nodiscard]] Result<std::vector<std::uint64_t>> plan_group_shares(std::span<const GroupMember> members,
                                                                   std::uint64_t vector_length);

// The naive split the planner is measured against (averaging.shares: equal, docs/recipes.md): every member
// that can reduce (node or aux) gets the same share whatever its bandwidth, clients none; rounded as
// round_shares does. The same errors as plan_group_shares (the members are checked alike).
[[nodiscard]] Result<std::vector<std::uint64_t>> equal_group_shares(std::span<const GroupMember> members,
                                                                    std::uint64_t vector_length);

}  // namespace dedloc::plan
