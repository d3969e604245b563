// Solve times of the planner (bench/plan/README.md): the group program (closed form, and the same program
// as an LP on lpsolve) and the full collaboration plan, on seeded random peer sets. Writes one JSON
// document on stdout with the timings and every group instance, so bench/plan/scipy_baseline.py can solve
// the very same instances with SciPy's HiGHS in the same run and compare objectives.
//
//   plan_bench [--sizes 8,64,256,512] [--repeats 101]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dedloc/plan/collaboration_plan.hpp"
#include "dedloc/plan/group_shares.hpp"

using namespace dedloc::plan;
using Clock = std::chrono::steady_clock;

namespace {

double log_uniform(std::mt19937_64& rng, double lo, double hi) {
  return std::exp(std::uniform_real_distribution<double>(std::log(lo), std::log(hi))(rng));
}

// Like an averaging group in the wild: 60% nodes, 20% client-mode, 20% auxiliary, 10 Mbit/s to 1 Gbit/s.
std::vector<GroupMember> random_group(std::mt19937_64& rng, std::size_t n) {
  std::vector<GroupMember> members;
  std::discrete_distribution<int> role({6, 2, 2});
  for (std::size_t i = 0; i < n; ++i) {
    members.push_back({"m" + std::to_string(i), log_uniform(rng, 10e6 / 8, 1e9 / 8), static_cast<MemberRole>(role(rng))});
  }
  members.front().role = MemberRole::kNode;
  return members;
}

Collaboration random_collaboration(std::mt19937_64& rng, std::size_t n) {
  Collaboration c;
  c.params = 18e6;
  std::bernoulli_distribution cpu_only(0.3), client(0.25);
  for (std::size_t i = 0; i < n; ++i) {
    c.peers.push_back({"peer-" + std::to_string(i), cpu_only(rng) ? 0.0 : std::uniform_real_distribution<double>(10, 200)(rng),
                       log_uniform(rng, 10e6 / 8, 1e9 / 8), log_uniform(rng, 10e6 / 8, 1e9 / 8), client(rng)});
  }
  c.peers.front().compute = 100;
  c.peers.back().client_mode = false;
  return c;
}

// Median seconds of `repeats` calls of f (each timed on its own).
template <class F>
double median_seconds(int repeats, F&& f) {
  std::vector<double> samples;
  for (int r = 0; r < repeats; ++r) {
    auto start = Clock::now();
    f();
    samples.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::nth_element(samples.begin(), samples.begin() + repeats / 2, samples.end());
  return samples[static_cast<std::size_t>(repeats / 2)];
}

std::vector<std::size_t> parse_sizes(const std::string& text) {
  std::vector<std::size_t> sizes;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t comma = text.find(',', pos);
    sizes.push_back(std::stoul(text.substr(pos, comma - pos)));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return sizes;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> sizes{8, 64, 256, 512};
  int repeats = 101;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--sizes") sizes = parse_sizes(argv[i + 1]);
    else if (flag == "--repeats") repeats = std::stoi(argv[i + 1]);
    else {
      std::cerr << "usage: plan_bench [--sizes 8,64,256,512] [--repeats 101]\n";
      return 2;
    }
  }

  nlohmann::json out;
  out["repeats"] = repeats;
  out["sizes"] = nlohmann::json::array();
  for (std::size_t n : sizes) {
    std::mt19937_64 rng(1000 + n);
    auto members = random_group(rng, n);
    auto closed = solve_group_program(members);
    auto lp = solve_group_program_lp(members);
    if (!closed || !lp) {
      std::cerr << "group program failed at n=" << n << "\n";
      return 1;
    }
    double closed_s = median_seconds(repeats, [&] { (void)solve_group_program(members); });
    double lp_s = median_seconds(std::max(5, repeats / 10), [&] { (void)solve_group_program_lp(members); });

    auto collaboration = random_collaboration(rng, n);
    auto plan = plan_collaboration(collaboration);
    if (!plan) {
      std::cerr << "plan failed at n=" << n << ": " << plan.status().to_string() << "\n";
      return 1;
    }
    double plan_s = median_seconds(std::max(3, repeats / 20), [&] { (void)plan_collaboration(collaboration); });

    nlohmann::json entry{{"n", n},
                         {"group_closed_form_seconds", closed_s},
                         {"group_lpsolve_seconds", lp_s},
                         {"group_xi", closed->xi},
                         {"group_lpsolve_xi", lp->xi},
                         {"plan_seconds", plan_s},
                         {"plan_method", method_name(plan->method)},
                         {"plan_steps_per_second", plan->prediction.steps_per_second}};
    nlohmann::json group = nlohmann::json::array();
    for (const auto& m : members) group.push_back({{"bandwidth", m.bandwidth}, {"role", static_cast<int>(m.role)}});
    entry["group"] = group;
    out["sizes"].push_back(entry);
  }

  // The exact MILP on its own (no heuristic bound), where the exact limit is set.
  out["milp"] = nlohmann::json::array();
  for (std::size_t n : {8, 12, 16, 24, 32}) {
    std::mt19937_64 rng(2000 + n);
    auto collaboration = random_collaboration(rng, n);
    PlanOptions options{.exact_peer_limit = n, .solver_timeout_seconds = 30, .seed_exact_with_heuristic = false};
    auto start = Clock::now();
    auto plan = plan_collaboration(collaboration, options);
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    PlanOptions seeded = options;
    seeded.seed_exact_with_heuristic = true;
    start = Clock::now();
    auto seeded_plan = plan_collaboration(collaboration, seeded);
    double seeded_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    out["milp"].push_back({{"n", n},
                           {"seconds", seconds},
                           {"seeded_seconds", seeded_seconds},
                           {"method", plan ? std::string(method_name(plan->method)) : plan.status().to_string()},
                           {"seeded_method", seeded_plan ? std::string(method_name(seeded_plan->method)) : ""}});
  }
  std::cout << out.dump() << "\n";
  return 0;
}
