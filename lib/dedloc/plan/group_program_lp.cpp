// The group program as a general LP, for reference (see group_shares.hpp):
//   maximize −ξ'  s.t.  traffic_i(w) − ξ'·b'_i ≤ 0,  Σ w_i = 1,  w ≥ 0,  w_i = 0 for clients,
// with bandwidths scaled to b' = b / max b so lpsolve works near 1 (ξ = ξ' / max b).
// traffic_i = 1 + (n_s − 2)·w_i for nodes holds for every n_s ≥ 1, so no special cases are needed here.
#include <algorithm>

#include "dedloc/plan/group_shares.hpp"
#include "dedloc/plan/lp_solver.hpp"

namespace dedloc::plan {

Result<GroupProgramSolution> solve_group_program_lp(std::span<const GroupMember> members, double timeout_seconds) {
  if (members.empty()) return error(Code::kInvalidArgument, "group program: the group has no members");
  double senders = 0;
  double scale = 0;
  for (const auto& m : members) {
    if (!(m.bandwidth > 0)) return error(Code::kInvalidArgument, "group program: member '" + m.id + "' has no bandwidth");
    senders += m.role != MemberRole::kAux ? 1 : 0;
    scale = std::max(scale, m.bandwidth);
  }
  const int n = static_cast<int>(members.size());
  auto lp = LinearProgram::create(n + 1);  // column 0: ξ', then w_i
  if (!lp) return lp.status();
  lp->maximize(std::vector<int>{0}, std::vector<double>{-1});
  std::vector<int> all(members.size());
  for (int i = 0; i < n; ++i) {
    all[static_cast<std::size_t>(i)] = i + 1;
    const auto& m = members[static_cast<std::size_t>(i)];
    const double b = m.bandwidth / scale;
    switch (m.role) {
      case MemberRole::kNode:
        lp->add_row(std::vector<int>{i + 1, 0}, std::vector<double>{senders - 2, -b}, RowType::kLessEqual, -1);
        break;
      case MemberRole::kClient:
        lp->set_bounds(i + 1, 0, 0);
        lp->add_row(std::vector<int>{0}, std::vector<double>{-b}, RowType::kLessEqual, -1);
        break;
      case MemberRole::kAux:
        lp->add_row(std::vector<int>{i + 1, 0}, std::vector<double>{senders, -b}, RowType::kLessEqual, 0);
        break;
    }
  }
  lp->add_row(all, std::vector<double>(members.size(), 1.0), RowType::kEqual, 1);
  auto solution = lp->solve(timeout_seconds);
  if (!solution) return solution.status();
  GroupProgramSolution out;
  out.xi = solution->values[0] / scale;
  out.weights.assign(solution->values.begin() + 1, solution->values.end());
  return out;
}

}  // namespace dedloc::plan
