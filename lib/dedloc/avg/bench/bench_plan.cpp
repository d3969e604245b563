#include "dedloc/avg/bench/bench_plan.hpp"

#include <unistd.h>

#include <cmath>

#include "dedloc/lab/link_spec.hpp"
#include "dedloc/net/transport_security.hpp"
#include "dedloc/plan/group_shares.hpp"
#include "dedloc/plan/units.hpp"

namespace dedloc::avg::bench {

Result<std::uint64_t> parse_size(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  static const std::pair<std::string_view, double> kUnits[] = {
      {"", 1}, {"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
      {"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}};
  for (const auto& [name, scale] : kUnits) {
    if (used > 0 && unit == name && value > 0 && std::isfinite(value)) {
      return static_cast<std::uint64_t>(std::llround(value * scale));
    }
  }
  return error(Code::kInvalidArgument, "--size '" + text + "': expected a positive size such as 64MiB, 256MiB, 1GiB or 100MB");
}

Result<BenchPlan> plan_all_reduce_bench(const BenchOptions& o) {
  auto usage = [](const std::string& why) { return error(Code::kInvalidArgument, why); };
  BenchPlan plan;
  if (o.peers < 2 || o.peers > 64) return usage("--peers must be between 2 and 64");
  if (o.rounds < 1) return usage("--rounds must be at least 1");
  if (o.window < 1) return usage("--window must be at least 1");
  if (o.max_window < o.window) return usage("--max-window must be at least --window");
  if (o.part_kib < 1 || o.part_kib > 16384) return usage("--part-kib must be between 1 and 16384");
  if (!(o.timeout_seconds > 0)) return usage("--timeout must be positive");
  auto bytes = parse_size(o.size);
  if (!bytes) return bytes.status();
  if (*bytes % sizeof(float) != 0 || *bytes / sizeof(float) < o.peers) {
    return usage("--size must be a multiple of 4 bytes (float32), at least one value per peer");
  }
  plan.bytes = *bytes;
  plan.elements = *bytes / sizeof(float);
  auto codec = parse_codec(o.codec);
  if (!codec) return codec.status().with_context("--codec");
  plan.codec = *codec;
  plan.part_elements = part_elements_for(kPartGridCodec, std::uint64_t{o.part_kib} * 1024);
  if (!o.bandwidths.empty()) {
    if (o.bandwidths.size() != o.peers) {
      return usage("--bandwidths needs one rate per peer (" + std::to_string(o.peers) + "), got " +
                   std::to_string(o.bandwidths.size()));
    }
    for (const auto& text : o.bandwidths) {
      auto rate = plan::parse_rate(text, "--bandwidths");
      if (!rate) return rate.status();
      if (!(*rate > 0)) return usage("--bandwidths: every rate must be positive");
      plan.rates.push_back(*rate);
    }
  }
  if (o.uniform && plan.rates.empty()) return usage("--uniform only makes sense with --bandwidths");
  if (o.emulate_links && plan.rates.empty()) return usage("--emulate-links needs --bandwidths (the rate of each peer's link)");
  if (!plan.rates.empty() && !o.uniform) {
    std::vector<plan::GroupMember> members;
    for (size_t i = 0; i < o.peers; ++i) members.push_back({"peer-" + std::to_string(i), plan.rates[i], plan::MemberRole::kNode});
    auto counts = plan::plan_group_shares(members, plan.elements);
    if (!counts) return counts.status().with_context("planning the shares");
    plan.counts = *counts;
    plan.planned = true;
  } else {
    for (size_t i = 0; i < o.peers; ++i) plan.counts.push_back(plan.elements / o.peers + (i < plan.elements % o.peers ? 1 : 0));
  }
  plan.part_elements = grid_part_elements(plan.counts, plan.part_elements);  // as a leader cuts it for these shares
  if (o.emulate_links && ::geteuid() != 0) return usage("--emulate-links needs root (network namespaces, TUN devices)");
  auto rtt = lab::parse_duration(o.rtt, "--rtt");
  if (!rtt) return rtt.status();
  auto loss = lab::parse_probability(o.loss, "--loss");
  if (!loss) return loss.status();
  if ((*rtt > Duration::zero() || *loss > 0) && !o.emulate_links) return usage("--rtt and --loss need --emulate-links");
  plan.rtt = *rtt;
  plan.loss = *loss;
  if (o.mtu != lab::LabNetworkOptions{}.mtu && !o.emulate_links) return usage("--mtu needs --emulate-links");
  if (o.mtu < lab::kMinMtu || o.mtu > lab::kMaxMtu) {
    return usage("--mtu must be within " + std::to_string(lab::kMinMtu) + "-" + std::to_string(lab::kMaxMtu));
  }
  plan.mtu = o.mtu;
  if (o.congestion_control != lab::kDefaultCongestionControl && !o.emulate_links) {
    return usage("--congestion-control needs --emulate-links");
  }
  plan.congestion_control = o.congestion_control;
  if (!o.lab_hosts.empty()) {
    if (o.emulate_links) return usage("--lab-hosts and --emulate-links exclude each other");
    if (o.lab_hosts.size() != o.peers) {
      return usage("--lab-hosts needs one NETNS@ADDRESS per peer (" + std::to_string(o.peers) + "), got " +
                   std::to_string(o.lab_hosts.size()));
    }
    for (const auto& host : o.lab_hosts) {
      const size_t at = host.find('@');
      if (at == std::string::npos || at == 0 || at + 1 == host.size()) {
        return usage("--lab-hosts: '" + host + "' is not NETNS@ADDRESS (as dedloc-lab up prints them)");
      }
      plan.netns.push_back(host.substr(0, at));
      plan.addresses.push_back(host.substr(at + 1));
    }
  }
  if (o.encrypted) DEDLOC_RETURN_IF_ERROR(net::require_curve());
  return plan;
}

}  // namespace dedloc::avg::bench
