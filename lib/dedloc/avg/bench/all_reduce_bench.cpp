#include "dedloc/avg/bench/all_reduce_bench.hpp"

#include <algorithm>
#include <random>

#include "dedloc/avg/bench/emulated_links.hpp"
#include "dedloc/avg/bench/peer_processes.hpp"

namespace dedloc::avg::bench {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

void summarize(BenchReport& report, std::uint64_t bytes, size_t peers) {
  const double n = static_cast<double>(peers);
  std::vector<double> times, cpu;
  for (const auto& r : report.rounds) {
    times.push_back(r.seconds);
    cpu.push_back(r.cpu_seconds);
    report.max_rel_error = std::max(report.max_rel_error, r.max_rel_error);
    report.tolerance_rel = std::max(report.tolerance_rel, r.tolerance_rel);
  }
  report.median_seconds = median(times);
  report.median_cpu_seconds = median(cpu);
  report.algbw_gbps = report.median_seconds > 0 ? static_cast<double>(bytes) / report.median_seconds / 1e9 : 0;
  report.busbw_gbps = report.algbw_gbps * 2 * (n - 1) / n;
}

}  // namespace

Result<BenchReport> run_all_reduce_bench(const BenchOptions& o, const BenchPlan& plan,
                                         const std::function<bool()>& interrupted) {
  BenchPeerSetup setup;
  setup.peers = o.peers;
  setup.elements = plan.elements;
  setup.codec = plan.codec;
  setup.round_timeout = from_seconds(o.timeout_seconds);
  setup.idle_timeout = from_seconds(2 * o.timeout_seconds + 60);
  setup.encrypted = o.encrypted;
  setup.name = o.name;
  // No faults are expected here: the sender and reducer timeouts only keep a stuck round from hanging.
  setup.all_reduce.codec = plan.codec;
  setup.all_reduce.window = o.window;
  setup.all_reduce.max_window = o.max_window;
  setup.all_reduce.max_in_flight = o.max_in_flight;
  setup.all_reduce.sender_timeout = from_seconds(o.timeout_seconds / 2);
  setup.all_reduce.reducer_timeout = from_seconds(o.timeout_seconds * 3 / 4);

  // Declared first, destroyed last: the peers are reaped (killed at once on an error) before the links go.
  std::unique_ptr<EmulatedLinks> links;
  if (o.emulate_links) {
    auto made = EmulatedLinks::create(plan.rates, plan.rtt, plan.loss,
                                      {.mtu = plan.mtu, .congestion_control = plan.congestion_control});
    if (!made) return made.status().with_context("--emulate-links");
    links = std::move(*made);
    setup.netns = links->namespaces();
  } else {
    setup.netns = plan.netns;
  }
  PeerProcesses peers(interrupted);
  DEDLOC_RETURN_IF_ERROR(peers.fork_all(o.peers, setup));
  if (links) links->start();
  const Deadline startup = Deadline::after(from_seconds(o.timeout_seconds));
  for (size_t i = 0; i < peers.size(); ++i) {
    if (auto ready = peers.receive(i, PipeMessage::kReady, startup); !ready) return ready.status();
  }
  for (size_t i = 0; i < peers.size(); ++i) {
    const std::string host = links ? links->host_of(i) : plan.addresses.empty() ? "127.0.0.1" : plan.addresses[i];
    PipeWriter w;
    w.bytes(as_bytes(host));
    DEDLOC_RETURN_IF_ERROR(peers.send(i, PipeMessage::kListen, w));
  }
  BenchGroup group;
  for (size_t i = 0; i < peers.size(); ++i) {
    auto bytes = peers.receive(i, PipeMessage::kHello, startup);
    if (!bytes) return bytes.status();
    auto hello = PeerHello::decode(*bytes);
    if (!hello) return error(Code::kMalformed, "peer " + std::to_string(i) + " sent a bad hello");
    group.members.push_back({hello->id, hello->endpoint, plan.counts[i], static_cast<double>(i + 1)});
  }
  group.length = plan.elements;
  group.part_elements = plan.part_elements;
  const PipeWriter group_message = group.encode();
  for (size_t i = 0; i < peers.size(); ++i) DEDLOC_RETURN_IF_ERROR(peers.send(i, PipeMessage::kGroup, group_message));

  std::random_device entropy;
  std::mt19937_64 rng((static_cast<std::uint64_t>(entropy()) << 32) ^ entropy());
  BenchReport report;
  for (size_t round = 0; round < o.rounds + 1; ++round) {
    Bytes group_id(wire::kGroupIdBytes);
    for (auto& b : group_id) b = static_cast<std::uint8_t>(rng());
    PipeWriter w;
    w.bytes(group_id);
    for (size_t i = 0; i < peers.size(); ++i) DEDLOC_RETURN_IF_ERROR(peers.send(i, PipeMessage::kRound, w));
    const Deadline deadline = Deadline::after(from_seconds(o.timeout_seconds + 10));
    RoundOutcome outcome;
    double worst_abs = 0, scale = 0, bound = 0;
    for (size_t i = 0; i < peers.size(); ++i) {
      auto bytes = peers.receive(i, PipeMessage::kReport, deadline);
      if (!bytes) return bytes.status();
      auto peer = PeerReport::decode(*bytes);
      if (!peer) return peer.status();
      if (peer->code != Code::kOk) {
        return error(peer->code, "peer " + std::to_string(i) + ": the all-reduce failed: " + peer->message);
      }
      if (peer->averaged_fraction != 1.0 || peer->banned || peer->failed) {
        report.wrong = true;
        report.wrong_why = "peer " + std::to_string(i) + " averaged only " + std::to_string(peer->averaged_fraction) +
                           " of its vector (banned " + std::to_string(peer->banned) + " senders, gave up on " +
                           std::to_string(peer->failed) + " reducers)";
      }
      outcome.peer_seconds.push_back(peer->seconds);
      outcome.cpu_seconds += peer->cpu_seconds;
      worst_abs = std::max(worst_abs, peer->max_abs_error);
      scale = std::max(scale, peer->scale);
      bound = std::max(bound, peer->bound);
    }
    outcome.seconds = *std::max_element(outcome.peer_seconds.begin(), outcome.peer_seconds.end());
    scale = std::max(scale, 1e-30);
    outcome.max_rel_error = worst_abs / scale;
    outcome.tolerance_rel = (3 * bound) / scale + 1e-5;
    if (!(outcome.max_rel_error <= outcome.tolerance_rel)) {
      report.wrong = true;
      report.wrong_why = "round " + std::to_string(round) + ": relative error " + std::to_string(outcome.max_rel_error) +
                         " exceeds the tolerance " + std::to_string(outcome.tolerance_rel);
    }
    if (round > 0) report.rounds.push_back(outcome);  // round 0 warms up
  }
  peers.stop(std::chrono::seconds(10));
  summarize(report, plan.bytes, o.peers);
  return report;
}

}  // namespace dedloc::avg::bench
