// bench/rpc: dedloc's RPC layer against bare cppzmq, side by side in one run.
//
// Both sides do the same work: a DEALER keeps `window` requests in flight to a ROUTER, which echoes each
// request's payload back. dedloc adds what a real peer needs (msgpack envelope, request ids, deadlines,
// the loop thread, decoding with limits); bare ZeroMQ does nothing but move frames. Reported: requests/s
// and payload MB/s (one direction), median over rounds that alternate the two, and dedloc/bare ratio.
//
// Usage: bench_rpc [--rounds N] [--seconds S]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "dedloc/net/client.hpp"
#include "dedloc/net/server.hpp"
#include "dedloc/wire/messages.hpp"

using namespace dedloc;
using namespace dedloc::net;
using SteadyClock = std::chrono::steady_clock;

namespace {

struct Sample {
  double requests_per_s;
  double mb_per_s;
};

constexpr size_t kWindow = 16;

Sample run_dedloc(zmq::context_t& context, size_t payload, double seconds) {
  ServerOptions server_options;
  // The transport's own capacity is measured: no per-connection rate limit (net::PeerRateLimits, 20,000
  // requests/s by default, which one client pushing small requests on loopback exceeds).
  server_options.peer_limits.requests_per_second = 0;
  server_options.peer_limits.bytes_per_second = 0;
  Server server(context, server_options);
  if (!server.start().is_ok()) std::abort();
  Client client(context, {});
  Bytes data(payload, 0x5a);
  auto request = [&](std::uint64_t seq) {
    std::vector<zmq::message_t> frames;
    frames.emplace_back(data.data(), data.size());
    return client.call(server.endpoint(), Outgoing::of(wire::Probe{seq, true}, std::move(frames)),
                       Deadline::after(std::chrono::seconds(30)));
  };
  std::deque<PendingCall> in_flight;
  std::uint64_t seq = 0, done = 0;
  auto start = SteadyClock::now();
  auto end = start + std::chrono::duration<double>(seconds);
  for (size_t i = 0; i < kWindow; ++i) in_flight.push_back(request(seq++));
  while (!in_flight.empty()) {
    auto reply = in_flight.front().wait();
    in_flight.pop_front();
    if (!reply || reply->payload_bytes() != payload) {
      std::fprintf(stderr, "dedloc: bad reply: %s\n", reply.status().to_string().c_str());
      std::abort();
    }
    ++done;
    if (SteadyClock::now() < end) in_flight.push_back(request(seq++));
  }
  double elapsed = std::chrono::duration<double>(SteadyClock::now() - start).count();
  return {static_cast<double>(done) / elapsed, static_cast<double>(done) * static_cast<double>(payload) / elapsed / 1e6};
}

Sample run_bare(zmq::context_t& context, size_t payload, double seconds) {
  zmq::socket_t router(context, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.bind("tcp://127.0.0.1:0");
  std::string endpoint = router.get(zmq::sockopt::last_endpoint);
  std::atomic<bool> stop{false};
  std::thread echo([&] {
    router.set(zmq::sockopt::rcvtimeo, 100);
    while (!stop.load()) {
      zmq::message_t id, body;
      if (!router.recv(id)) continue;
      (void)router.recv(body);
      router.send(id, zmq::send_flags::sndmore);
      router.send(body, zmq::send_flags::none);
    }
  });
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(endpoint);
  Bytes data(payload, 0x5a);
  auto send_one = [&] {
    zmq::message_t m(data.data(), data.size());
    dealer.send(m, zmq::send_flags::none);
  };
  std::uint64_t done = 0;
  size_t in_flight = 0;
  auto start = SteadyClock::now();
  auto end = start + std::chrono::duration<double>(seconds);
  for (size_t i = 0; i < kWindow; ++i, ++in_flight) send_one();
  while (in_flight > 0) {
    zmq::message_t reply;
    (void)dealer.recv(reply);
    if (reply.size() != payload) std::abort();
    --in_flight;
    ++done;
    if (SteadyClock::now() < end) {
      send_one();
      ++in_flight;
    }
  }
  double elapsed = std::chrono::duration<double>(SteadyClock::now() - start).count();
  stop.store(true);
  echo.join();
  return {static_cast<double>(done) / elapsed, static_cast<double>(done) * static_cast<double>(payload) / elapsed / 1e6};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  double seconds = 1.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::stoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--seconds") == 0) seconds = std::stod(argv[i + 1]);
  }
  zmq::context_t context;
  std::printf("bench_rpc: %d rounds x %.1f s each, window %zu, payload echoed back\n", rounds, seconds, kWindow);
  std::printf("%-8s %14s %14s %12s %12s %8s\n", "payload", "dedloc req/s", "bare req/s", "dedloc MB/s", "bare MB/s",
              "ratio");
  for (size_t payload : {size_t{1} << 10, size_t{1} << 20}) {
    std::vector<double> ours_rps, bare_rps, ours_mb, bare_mb, ratios;
    for (int r = 0; r < rounds; ++r) {
      // Alternate which goes first so drift on a shared machine hits both alike.
      Sample a, b;
      if (r % 2 == 0) {
        a = run_dedloc(context, payload, seconds);
        b = run_bare(context, payload, seconds);
      } else {
        b = run_bare(context, payload, seconds);
        a = run_dedloc(context, payload, seconds);
      }
      ours_rps.push_back(a.requests_per_s);
      bare_rps.push_back(b.requests_per_s);
      ours_mb.push_back(a.mb_per_s);
      bare_mb.push_back(b.mb_per_s);
      ratios.push_back(a.requests_per_s / b.requests_per_s);
    }
    std::printf("%-8s %14.0f %14.0f %12.1f %12.1f %7.2fx\n", payload == 1024 ? "1 KiB" : "1 MiB", median(ours_rps),
                median(bare_rps), median(ours_mb), median(bare_mb), median(ratios));
  }
  return 0;
}
