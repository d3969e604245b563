// bench/relay: a 64 MiB transfer and a ping, direct and through a relay, side by side in one run.
//
// A peer's Server on loopback is reached two ways by the same Client: directly (tcp://) and as a client-mode
// peer behind a relay (relay://, via RelayServer + RelayLink, all in this process on 127.0.0.1, each role
// with its own ZeroMQ context as if it were its own process). The
// transfer is 64 MiB of Probe payload in 4 MiB requests, 4 in flight (like a state download's parts); the
// latency is the round trip of a Ping, 200 in a row. Rounds alternate direct and relayed; reported are the
// medians and the relayed/direct ratios. The relay's rate limits are lifted for the benchmark.
//
// Also reported: CPU seconds per GB moved (user + system, every thread of this process: all roles run
// here, so it is the whole work of a path). On a machine with few cores the transfer is CPU-bound, and
// this says what the relay's extra hop costs: a relayed byte is copied into and out of the kernel twice
// (client → relay, relay → peer), a direct one once.
//
// Usage: bench_relay [--rounds N]
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "dedloc/crypto/identity.hpp"
#include "dedloc/net/client.hpp"
#include "dedloc/net/relay_link.hpp"
#include "dedloc/net/server.hpp"
#include "dedloc/relay/relay_server.hpp"
#include "dedloc/wire/messages.hpp"

using namespace dedloc;
using namespace dedloc::net;
using SteadyClock = std::chrono::steady_clock;

namespace {

constexpr size_t kTotalBytes = 64u << 20;
constexpr size_t kPartBytes = 4u << 20;
constexpr size_t kWindow = 4;
constexpr int kPings = 200;

// CPU seconds (user + system) this process has used, all threads.
double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

struct Transfer {
  double seconds = 0;
  double cpu_seconds = 0;
};

// Moves kTotalBytes to `endpoint`: the wall time and the CPU time it took.
Transfer transfer(Client& client, const std::string& endpoint, const Bytes& part) {
  auto send = [&](std::uint64_t seq) {
    std::vector<zmq::message_t> frames;
    frames.emplace_back(part.data(), part.size());
    return client.call(endpoint, Outgoing::of(wire::Probe{seq, false}, std::move(frames)),
                       Deadline::after(std::chrono::seconds(60)));
  };
  const size_t parts = kTotalBytes / kPartBytes;
  std::deque<PendingCall> in_flight;
  size_t sent = 0;
  auto start = SteadyClock::now();
  const double cpu_start = cpu_seconds();
  while (sent < parts && in_flight.size() < kWindow) in_flight.push_back(send(sent++));
  while (!in_flight.empty()) {
    auto reply = in_flight.front().wait();
    in_flight.pop_front();
    if (!reply) {
      std::fprintf(stderr, "bench_relay: a transfer to %s failed: %s\n", endpoint.c_str(), reply.status().to_string().c_str());
      std::exit(1);
    }
    if (sent < parts) in_flight.push_back(send(sent++));
  }
  return {std::chrono::duration<double>(SteadyClock::now() - start).count(), cpu_seconds() - cpu_start};
}

// Median round trip of a Ping, in microseconds.
double ping_us(Client& client, const std::string& endpoint) {
  std::vector<double> rtts;
  for (int i = 0; i < kPings; ++i) {
    auto start = SteadyClock::now();
    auto reply = client.call(endpoint, Outgoing::of(wire::Ping{0}), Deadline::after(std::chrono::seconds(5))).wait();
    if (!reply) std::exit(1);
    rtts.push_back(std::chrono::duration<double, std::micro>(SteadyClock::now() - start).count());
  }
  std::nth_element(rtts.begin(), rtts.begin() + kPings / 2, rtts.end());
  return rtts[kPings / 2];
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::max(1, std::atoi(argv[i + 1]));
  }
  Logger::global().set_level(LogLevel::kWarning);
  // One ZeroMQ context (I/O thread) per role, as in real life where each is its own process.
  zmq::context_t peer_context, relay_context, client_context;
  auto peer_id = crypto::Identity::generate();
  auto relay_id = crypto::Identity::generate();
  // The link hands relayed requests to the server in-process, as dedloc-train does.
  Server server(peer_context, {.listen = "tcp://127.0.0.1:0", .self = peer_id.peer_id(), .also_listen = {"inproc://bench-peer"}});
  relay::RelayOptions relay_options{.listen = "tcp://127.0.0.1:0"};
  relay_options.limits.bytes_per_second = 1e15;
  relay_options.limits.burst_bytes = 1e15;
  relay::RelayServer relay(relay_context, relay_id, relay_options);
  if (!server.start().is_ok() || !relay.start().is_ok()) return 1;
  RelayLink link(peer_context, peer_id, {.relay = {relay.endpoint(), relay_id.peer_id()}, .local_endpoint = "inproc://bench-peer"});
  if (auto attached = link.start(); !attached.is_ok()) {
    std::fprintf(stderr, "bench_relay: %s\n", attached.to_string().c_str());
    return 1;
  }
  Client client(client_context, {});
  Bytes part(kPartBytes, 0x5a);
  transfer(client, server.endpoint(), part);  // warm-up: connections, first touch
  transfer(client, link.address(), part);

  std::vector<double> direct_mbs, relayed_mbs, direct_ping, relayed_ping, direct_cpu, relayed_cpu;
  const double gigabytes = kTotalBytes / 1e9;
  for (int r = 0; r < rounds; ++r) {
    auto direct = transfer(client, server.endpoint(), part);
    auto relayed = transfer(client, link.address(), part);
    direct_mbs.push_back(kTotalBytes / 1e6 / direct.seconds);
    relayed_mbs.push_back(kTotalBytes / 1e6 / relayed.seconds);
    direct_cpu.push_back(direct.cpu_seconds / gigabytes);
    relayed_cpu.push_back(relayed.cpu_seconds / gigabytes);
    direct_ping.push_back(ping_us(client, server.endpoint()));
    relayed_ping.push_back(ping_us(client, link.address()));
  }
  double d = median(direct_mbs), rl = median(relayed_mbs), dp = median(direct_ping), rp = median(relayed_ping);
  double dc = median(direct_cpu), rc = median(relayed_cpu);
  std::printf("64 MiB in 4 MiB parts, %zu in flight, %d rounds (medians), loopback\n", kWindow, rounds);
  std::printf("%-10s %12s %14s %12s\n", "path", "MB/s", "ping RTT (us)", "CPU s/GB");
  std::printf("%-10s %12.0f %14.0f %12.3f\n", "direct", d, dp, dc);
  std::printf("%-10s %12.0f %14.0f %12.3f\n", "relayed", rl, rp, rc);
  std::printf("relayed/direct throughput: %.2fx (goal >= 0.7x); added latency: %+.0f us per round trip; "
              "CPU per GB: %.2fx\n", rl / d, rp - dp, rc / dc);
  return 0;
}
