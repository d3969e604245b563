#include <algorithm>
#include <numeric>
#include <random>

#include <catch2/catch.hpp>

#include "dedloc/plan/group_shares.hpp"
#include "random_peers.hpp"

using namespace dedloc::plan;

namespace {

std::vector<GroupMember> random_group(std::mt19937_64& rng, std::size_t n) {
  std::vector<GroupMember> members;
  std::discrete_distribution<int> role({6, 2, 2});  // node, client, aux
  for (std::size_t i = 0; i < n; ++i) {
    members.push_back({"m" + std::to_string(i), test::log_uniform(rng, 1e6, 1e9), static_cast<MemberRole>(role(rng))});
  }
  members.front().role = MemberRole::kNode;  // one sender that can reduce
  return members;
}

// The largest traffic/bandwidth over the members: the ξ a share vector achieves (see group_shares.hpp).
double achieved_xi(const std::vector<GroupMember>& members, const std::vector<double>& w) {
  double senders = 0;
  for (const auto& m : members) senders += m.role != MemberRole::kAux ? 1 : 0;
  double xi = 0;
  for (std::size_t i = 0; i < members.size(); ++i) {
    double traffic = members[i].role == MemberRole::kNode     ? 1 + (senders - 2) * w[i]
                     : members[i].role == MemberRole::kClient ? 1
                                                              : senders * w[i];
    xi = std::max(xi, traffic / members[i].bandwidth);
  }
  return xi;
}

}  // namespace

TEST_CASE("equal members get equal shares and a uniform all-reduce", "[plan][group]") {
  std::vector<GroupMember> members;
  for (int i = 0; i < 8; ++i) members.push_back({"m" + std::to_string(i), 12.5e6, MemberRole::kNode});
  auto solution = solve_group_program(members);
  REQUIRE(solution);
  for (double w : solution->weights) CHECK(w == Approx(1.0 / 8));
  // Uniform all-reduce moves 2(n−1)/n of the vector through each link.
  CHECK(solution->xi == Approx(2.0 * 7 / 8 / 12.5e6));
  auto counts = plan_group_shares(members, 1000003);
  REQUIRE(counts);
  CHECK(std::accumulate(counts->begin(), counts->end(), std::uint64_t{0}) == 1000003);
  auto [lo, hi] = std::minmax_element(counts->begin(), counts->end());
  CHECK(*hi - *lo <= 1);
}

TEST_CASE("client-mode members never reduce, auxiliary members do", "[plan][group]") {
  std::vector<GroupMember> members{{"node", 100e6, MemberRole::kNode},
                                   {"client", 50e6, MemberRole::kClient},
                                   {"client2", 50e6, MemberRole::kClient},
                                   {"aux", 100e6, MemberRole::kAux}};
  auto counts = plan_group_shares(members, 4096);
  REQUIRE(counts);
  CHECK((*counts)[1] == 0);
  CHECK((*counts)[2] == 0);
  CHECK((*counts)[3] > 0);
  CHECK((*counts)[0] + (*counts)[3] == 4096);
}

TEST_CASE("a lone sender that reduces keeps its vector", "[plan][group]") {
  std::vector<GroupMember> members{{"node", 10e6, MemberRole::kNode}, {"aux", 100e6, MemberRole::kAux}};
  auto solution = solve_group_program(members);
  REQUIRE(solution);
  CHECK(solution->xi == 0);
  CHECK(solution->weights[0] == 1);
}

TEST_CASE("the group program rejects groups it cannot plan", "[plan][group]") {
  auto no_reducer = solve_group_program(std::vector<GroupMember>{{"c1", 1e6, MemberRole::kClient}, {"c2", 1e6, MemberRole::kClient}});
  REQUIRE_FALSE(no_reducer);
  CHECK_THAT(no_reducer.status().message(), Catch::Contains("client-mode"));
  auto no_sender = solve_group_program(std::vector<GroupMember>{{"a", 1e6, MemberRole::kAux}});
  REQUIRE_FALSE(no_sender);
  auto no_bandwidth = solve_group_program(std::vector<GroupMember>{{"n", 0, MemberRole::kNode}, {"m", 1e6, MemberRole::kNode}});
  REQUIRE_FALSE(no_bandwidth);
  CHECK_THAT(no_bandwidth.status().message(), Catch::Contains("'n'"));
  CHECK_FALSE(solve_group_program(std::vector<GroupMember>{}));
}

TEST_CASE("the closed form matches lpsolve's LP on random groups", "[plan][group][property]") {
  std::mt19937_64 rng(20211206);
  for (int trial = 0; trial < 200; ++trial) {
    auto members = random_group(rng, std::uniform_int_distribution<std::size_t>(1, 64)(rng));
    INFO("trial " << trial << ", " << members.size() << " members");
    auto closed = solve_group_program(members);
    auto lp = solve_group_program_lp(members);
    REQUIRE(closed);
    REQUIRE(lp);
    // Objectives agree; the closed form's shares really achieve its ξ and sum to 1.
    CHECK(closed->xi == Approx(lp->xi).epsilon(1e-6).margin(1e-15));
    CHECK(achieved_xi(members, closed->weights) <= closed->xi * (1 + 1e-9) + 1e-18);
    CHECK(std::accumulate(closed->weights.begin(), closed->weights.end(), 0.0) == Approx(1).epsilon(1e-12));
    for (std::size_t i = 0; i < members.size(); ++i) {
      CHECK(closed->weights[i] >= 0);
      if (members[i].role == MemberRole::kClient) CHECK(closed->weights[i] == 0);
    }
  }
}

TEST_CASE("group shares are deterministic, permutation-equivariant and exact", "[plan][group][property]") {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 100; ++trial) {
    auto members = random_group(rng, std::uniform_int_distribution<std::size_t>(1, 64)(rng));
    // Duplicate some members' bandwidth and role so ties in the rounding really occur.
    for (std::size_t i = 1; i < members.size(); i += 3) {
      members[i].bandwidth = members[i - 1].bandwidth;
      members[i].role = members[i - 1].role;
    }
    const std::uint64_t length = std::uniform_int_distribution<std::uint64_t>(0, 50'000'000)(rng);
    INFO("trial " << trial << ", " << members.size() << " members, length " << length);
    auto first = plan_group_shares(members, length);
    REQUIRE(first);
    CHECK(std::accumulate(first->begin(), first->end(), std::uint64_t{0}) == length);
    auto again = plan_group_shares(members, length);
    REQUIRE(again);
    CHECK(*again == *first);

    std::vector<std::size_t> perm(members.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<GroupMember> shuffled;
    for (std::size_t p : perm) shuffled.push_back(members[p]);
    auto permuted = plan_group_shares(shuffled, length);
    REQUIRE(permuted);
    for (std::size_t k = 0; k < perm.size(); ++k) CHECK((*permuted)[k] == (*first)[perm[k]]);
  }
}

TEST_CASE("rounding gives leftover elements by remainder, then bandwidth, then id", "[plan][group]") {
  std::vector<GroupMember> members{{"b", 10, MemberRole::kNode}, {"a", 10, MemberRole::kNode}, {"c", 20, MemberRole::kNode}};
  // Three equal thirds of 4: floors 1,1,1; the one left goes to the faster member, then to the smaller id.
  auto counts = round_shares(members, std::vector<double>{1.0 / 3, 1.0 / 3, 1.0 / 3}, 4);
  CHECK(counts == std::vector<std::uint64_t>{1, 1, 2});
  auto five = round_shares(members, std::vector<double>{1.0 / 3, 1.0 / 3, 1.0 / 3}, 5);
  CHECK(five == std::vector<std::uint64_t>{1, 2, 2});
}

TEST_CASE("equal shares ignore bandwidth, give clients nothing, and check the members alike", "[plan][group]") {
  // The paper's heterogeneous group (4 × 200, 8 × 100, 4 × 50 Mbit/s) plus a client and an aux peer.
  std::vector<GroupMember> members;
  for (int i = 0; i < 16; ++i) members.push_back({"m" + std::to_string(i), (i < 4 ? 200 : i < 12 ? 100 : 50) * 1e6 / 8, MemberRole::kNode});
  members.push_back({"client", 12.5e6, MemberRole::kClient});
  members.push_back({"aux", 125e6, MemberRole::kAux});
  auto equal = equal_group_shares(members, 1700003);
  REQUIRE(equal);
  CHECK(std::accumulate(equal->begin(), equal->end(), std::uint64_t{0}) == 1700003);
  CHECK((*equal)[16] == 0);
  std::vector<std::uint64_t> reducing(equal->begin(), equal->end());
  reducing.erase(reducing.begin() + 16);
  auto [lo, hi] = std::minmax_element(reducing.begin(), reducing.end());
  CHECK(*lo == 1700003 / 17);
  CHECK(*hi - *lo <= 1);
  // The planner's shares for the same group differ: the slow members reduce less than the fast ones.
  auto planned = plan_group_shares(members, 1700003);
  REQUIRE(planned);
  CHECK((*planned)[15] < (*planned)[0]);
  CHECK(*planned != *equal);

  auto no_bandwidth = equal_group_shares(std::vector<GroupMember>{{"n", 0, MemberRole::kNode}, {"m", 1e6, MemberRole::kNode}}, 10);
  REQUIRE_FALSE(no_bandwidth);
  CHECK_THAT(no_bandwidth.status().message(), Catch::Contains("'n'"));
  CHECK_FALSE(equal_group_shares(std::vector<GroupMember>{{"c1", 1e6, MemberRole::kClient}, {"c2", 1e6, MemberRole::kClient}}, 10));
}
