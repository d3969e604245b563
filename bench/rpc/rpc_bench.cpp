// bench/rpc: dedloc's RPC layer against bare cppzmq, side by side in one run.
//
// Both sides do the same work: a DEALER keeps `window` requests in flight to a ROUTER, which echoes each
// request's payload back. dedloc adds what a real peer needs (msgpack envelope, request ids, deadlines,
// the loop thread, decoding with limits); bare ZeroMQ does nothing but move frames. dedloc runs twice: in
// plaintext, and encrypted with CURVE as the tools run by default (net/transport_security.hpp). Reported:
// requests/s and payload MB/s (one direction), medians over rounds that rotate the order, dedloc/bare
// and CURVE/plaintext ratios.
//
// Usage: bench_rpc [--rounds N] [--seconds S]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "dedloc/crypto/identity.hpp"
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

Sample run_dedloc(zmq::context_t& context, size_t payload, double seconds, bool encrypted) {
  ServerOptions server_options;
  ClientOptions client_options;
  if (encrypted) {
    server_options.socket.transport = TransportKeys::of(crypto::Identity::generate());
    client_options.socket.transport = TransportKeys::of(crypto::Identity::generate());
  }
  // The transport's own capacity is measured: no per-connection rate limit (net::PeerRateLimits, 20,000
  // requests/s by default, which one client pushing small requests on loopback exceeds).
  server_options.peer_limits.requests_per_second = 0;
  server_options.peer_limits.bytes_per_second = 0;
  Server server(context, server_options);
  if (!server.start().is_ok()) std::abort();
  Client client(context, client_options);
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
  std::printf("%-8s %12s %12s %12s %10s %10s %10s %11s %11s\n", "payload", "bare req/s", "dedloc", "+CURVE",
              "bare MB/s", "dedloc", "+CURVE", "dedloc/bare", "CURVE/plain");
  for (size_t payload : {size_t{1} << 10, size_t{1} << 20}) {
    // [0] bare, [1] dedloc plaintext, [2] dedloc CURVE
    std::vector<double> rps[3], mb[3], vs_bare, curve_vs_plain;
    for (int r = 0; r < rounds; ++r) {
      // Rotate which goes first so drift on a shared machine hits all three alike.
      Sample got[3];
      for (int k = 0; k < 3; ++k) {
        int which = (k + r) % 3;
        got[which] = which == 0 ? run_bare(context, payload, seconds) : run_dedloc(context, payload, seconds, which == 2);
      }
      for (int which = 0; which < 3; ++which) {
        rps[which].push_back(got[which].requests_per_s);
        mb[which].push_back(got[which].mb_per_s);
      }
      vs_bare.push_back(got[1].requests_per_s / got[0].requests_per_s);
      curve_vs_plain.push_back(got[2].requests_per_s / got[1].requests_per_s);
    }
    std::printf("%-8s %12.0f %12.0f %12.0f %10.1f %10.1f %10.1f %10.2fx %10.2fx\n", payload == 1024 ? "1 KiB" : "1 MiB",
                median(rps[0]), median(rps[1]), median(rps[2]), median(mb[0]), median(mb[1]), median(mb[2]),
                median(vs_bare), median(curve_vs_plain));
  }
  return 0;
}
