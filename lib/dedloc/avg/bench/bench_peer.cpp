#include "dedloc/avg/bench/bench_peer.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <vector>

#include "dedloc/avg/bench/pipe_protocol.hpp"
#include "dedloc/avg/bench/synthetic_vector.hpp"
#include "dedloc/avg/group.hpp"
#include "dedloc/crypto/identity.hpp"
#include "dedloc/lab/lab_network.hpp"

namespace dedloc::avg::bench {
namespace {

// User + system CPU time of this process, all threads.
double process_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return sec(usage.ru_utime) + sec(usage.ru_stime);
}

// The codec's bound over the parts of `vector` as the group cuts it (before any round changes it).
double codec_bound(Codec codec, std::span<const float> vector, const BenchGroup& group) {
  double bound = 0;
  if (codec == Codec::kNone) return bound;
  std::uint64_t at = 0;
  for (const BenchGroup::Member& member : group.members) {
    for (std::uint64_t p = 0; p < member.count; p += group.part_elements) {
      const size_t size = static_cast<size_t>(std::min(group.part_elements, member.count - p));
      bound = std::max(bound, error_bound(codec, vector.subspan(static_cast<size_t>(at + p), size)));
    }
    at += member.count;
  }
  return bound;
}

}  // namespace

int run_bench_peer(const BenchPeerSetup& setup, int from_parent, int to_parent) {
  auto fail = [&](const Status& status) {
    std::cerr << setup.name << ": peer " << setup.index << ": " << status.to_string() << "\n";
    return 1;
  };
  if (setup.index < setup.netns.size()) {
    if (auto entered = lab::enter_netns(setup.netns[setup.index]); !entered.is_ok()) return fail(entered);
  }
  if (auto s = send_pipe_message(to_parent, PipeMessage::kReady); !s.is_ok()) return fail(s);
  auto listen = receive_pipe_message(from_parent, Deadline::after(setup.idle_timeout));
  if (!listen || listen->first != PipeMessage::kListen) {
    return fail(listen ? error(Code::kMalformed, "expected kListen") : listen.status());
  }
  const std::string host(listen->second.begin(), listen->second.end());

  // The vector is allocated and touched before any round (first touch costs more than the network here).
  std::vector<float> vector(static_cast<size_t>(setup.elements));
  const float own = static_cast<float>(setup.index + 1);
  fill_synthetic(vector, own);

  Logger& log = Logger::global();
  zmq::context_t context;
  crypto::Identity identity = crypto::Identity::generate();
  net::SocketOptions socket;
  if (setup.encrypted) socket.transport = net::TransportKeys::of(identity);
  net::Server server(context, net::ServerOptions{"tcp://" + host + ":0", identity.peer_id(), socket, &log});
  net::Client client(context, net::ClientOptions{identity.peer_id(), socket, std::chrono::seconds(600), &log});
  AllReduce all_reduce(server, client, identity.peer_id(), &log);
  if (auto s = server.start(); !s.is_ok()) return fail(s);
  if (auto s = send_pipe_message(to_parent, PipeMessage::kHello, PeerHello{server.endpoint(), identity.peer_id()}.encode());
      !s.is_ok()) {
    return fail(s);
  }

  wire::AvgBegin begin;
  std::vector<double> weights;
  double bound = 0;
  double mean = 0;
  while (true) {
    auto command = receive_pipe_message(from_parent, Deadline::after(setup.idle_timeout));
    if (!command) return fail(command.status().with_context("waiting for the parent"));
    auto& [type, payload] = *command;
    if (type == PipeMessage::kQuit) return 0;
    if (type == PipeMessage::kGroup) {
      auto group = BenchGroup::decode(payload);
      if (!group) return fail(group.status());
      begin = {};
      weights.clear();
      double numerator = 0, denominator = 0;
      for (size_t i = 0; i < group->members.size(); ++i) {
        const BenchGroup::Member& m = group->members[i];
        begin.ids.push_back(m.id);
        begin.endpoints.push_back(m.endpoint);
        begin.counts.push_back(m.count);
        begin.roles.push_back(AvgRole::kNode);
        weights.push_back(m.weight);
        numerator += m.weight * static_cast<double>(i + 1);
        denominator += m.weight;
      }
      begin.length = group->length;
      begin.part_elements = group->part_elements;
      mean = numerator / denominator;
      bound = codec_bound(setup.codec, vector, *group);
      continue;
    }
    if (type != PipeMessage::kRound || payload.size() != wire::kGroupIdBytes || weights.size() != setup.peers) {
      return fail(error(Code::kMalformed, "unexpected command from the parent"));
    }
    begin.group_id = payload;
    PeerReport report;
    report.bound = bound;
    auto group = Group::from_begin(begin);
    if (!group) {
      report.code = group.status().code();
      report.message = group.status().to_string();
    } else {
      const double cpu_start = process_cpu_seconds();
      const auto start = std::chrono::steady_clock::now();
      auto result = all_reduce.run(*group, vector, weights[setup.index], setup.all_reduce,
                                   Deadline::after(setup.round_timeout));
      report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      report.cpu_seconds = process_cpu_seconds() - cpu_start;
      if (!result) {
        report.code = result.status().code();
        report.message = result.status().to_string();
        fill_synthetic(vector, own);
      } else {
        report.averaged_fraction = result->averaged_fraction;
        report.banned = static_cast<std::uint32_t>(result->banned_senders.size());
        report.failed = static_cast<std::uint32_t>(result->failed_reducers.size());
        SyntheticCheck check = check_and_refill(vector, mean, own);
        report.max_abs_error = check.max_abs_error;
        report.scale = check.scale;
      }
    }
    if (auto s = send_pipe_message(to_parent, PipeMessage::kReport, report.encode()); !s.is_ok()) return fail(s);
  }
}

}  // namespace dedloc::avg::bench
