// The internet lab on this machine (root, network namespaces, /dev/net/tun): the emulator's delay and NAT
// seen from real sockets, and the butterfly all-reduce averaging exactly over long, rate-limited links.
// Without namespaces or TUN the whole binary reports SKIPPED with the reason (exit 77).
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <regex>
#include <thread>

#include "dedloc/avg/bench/all_reduce_bench.hpp"
#include "dedloc/lab/emulator.hpp"
#include "dedloc/lab/link_spec.hpp"
#include "support/process.hpp"
#include "support/skip.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;
using std::chrono::milliseconds;

namespace {

std::unique_ptr<lab::LabNetwork> make_lab_or_skip(size_t hosts) {
  auto network = lab::LabNetwork::create(hosts);
  if (!network) test::skip_test("the lab cannot run here: " + network.status().to_string());
  return std::move(*network);
}

// From inside host `from`'s namespace (this thread only), a TCP connection to address:port within 1 s.
bool connects(const lab::LabNetwork& network, size_t from, const std::string& address, int port) {
  bool ok = false;
  std::thread([&] {
    if (!lab::enter_netns(network.host(from).netns).is_ok()) return;
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, address.c_str(), &to.sin_addr);
    ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to);
    pollfd p{fd, POLLOUT, 0};
    int err = -1;
    socklen_t len = sizeof err;
    if (::poll(&p, 1, 1000) == 1) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    ok = err == 0;
    ::close(fd);
  }).join();
  return ok;
}

// A listening TCP socket inside host `at`'s namespace (the socket stays in that namespace); -1 on failure.
// Made on a thread of its own: setns() moves only the calling thread, and Catch2 asserts stay on the main one.
int listen_in(const lab::LabNetwork& network, size_t at, int port) {
  int fd = -1;
  std::thread([&] {
    if (!lab::enter_netns(network.host(at).netns).is_ok()) return;
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in here{};
    here.sin_family = AF_INET;
    here.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::bind(s, reinterpret_cast<sockaddr*>(&here), sizeof here) == 0 && ::listen(s, 8) == 0) {
      fd = s;
    } else {
      ::close(s);
    }
  }).join();
  return fd;  // -1 if it failed
}

}  // namespace

TEST_CASE("Lab: ping sees twice the configured one-way delay", "[proc][lab]") {
  auto network = make_lab_or_skip(2);
  const auto link = lab::host_link({.rtt = milliseconds(40), .upload = 12.5e6, .download = 12.5e6});
  lab::RunningEmulator running(*network, {link, link}, {false, false}, 1);
  auto ping = test::run_command("ip netns exec " + network->host(0).netns + " ping -n -c 8 -i 0.2 -W 2 " +
                                network->host(1).address);
  INFO(ping.output);
  REQUIRE(ping.exit_code == 0);
  std::smatch m;
  REQUIRE(std::regex_search(ping.output, m, std::regex(R"(= ([0-9.]+)/([0-9.]+)/([0-9.]+)/)")));
  const double fastest_ms = std::stod(m[1].str());
  // No packet may arrive early. The fastest one shows the emulator's own precision; the average does
  // not, because a busy machine (the rest of the suite on the other core) delays single replies by
  // several milliseconds, and that lateness is the scheduler's, not the emulator's.
  CHECK(fastest_ms >= 40);
  // Within 2 ms of 2 × 20 ms: the emulator's one thread shares the machine with the suite (beside the lab
  // scenarios all eight replies once took 41.0-42.1 ms; on this 2-core machine alone the fastest took
  // 40.8-41.1 ms).
  CHECK(fastest_ms <= 42);
}

TEST_CASE("Lab: every host runs the lab's TCP congestion control, not the machine's", "[proc][lab]") {
  auto congestion_control_in = [](const std::string& netns) {
    return test::run_command("ip netns exec " + netns + " cat /proc/sys/net/ipv4/tcp_congestion_control").output;
  };
  {
    auto network = make_lab_or_skip(2);
    for (const auto& host : network->hosts()) CHECK(congestion_control_in(host.netns) == "cubic\n");
  }  // one lab per process at a time: its namespaces are named after the process
  // Another algorithm where asked (reno is always built in), and a clear error for one this kernel lacks.
  auto reno = lab::LabNetwork::create(1, {.congestion_control = "reno"});
  REQUIRE(reno.is_ok());
  CHECK(congestion_control_in((*reno)->host(0).netns) == "reno\n");
  reno->reset();
  auto missing = lab::LabNetwork::create(1, {.congestion_control = "no-such-algorithm"});
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().message().find("no-such-algorithm") != std::string::npos);
  CHECK(missing.status().message().find("this kernel has") != std::string::npos);
}

TEST_CASE("Lab: a host behind NAT connects out but accepts nothing in", "[proc][lab]") {
  auto network = make_lab_or_skip(2);
  const auto link = lab::host_link({.rtt = milliseconds(2)});
  lab::RunningEmulator running(*network, {link, link}, {false, true}, 1);  // host 1 is behind NAT
  const int public_listener = listen_in(*network, 0, 7001);
  const int home_listener = listen_in(*network, 1, 7001);
  REQUIRE(public_listener >= 0);
  REQUIRE(home_listener >= 0);
  CHECK(connects(*network, 1, network->host(0).address, 7001));      // out: fine
  CHECK_FALSE(connects(*network, 0, network->host(1).address, 7001));  // in: dropped
  CHECK(running.emulator().stats().dropped_nat > 0);
  ::close(public_listener);
  ::close(home_listener);
}

TEST_CASE("Lab: 4 peers average exactly over 100 ms, 100 Mbit/s links with loss", "[proc][lab][avg]") {
  make_lab_or_skip(1);  // the reason, if the lab cannot run here
  avg::bench::BenchOptions options;
  options.peers = 4;
  options.size = "4MiB";
  options.rounds = 1;
  options.encrypted = false;
  options.emulate_links = true;
  options.bandwidths = {"100Mbit", "100Mbit", "100Mbit", "100Mbit"};
  options.uniform = true;
  options.rtt = "100ms";
  options.loss = "0.5%";
  options.timeout_seconds = 40;
  options.name = "lab test";
  auto plan = avg::bench::plan_all_reduce_bench(options);
  REQUIRE(plan.is_ok());
  auto report = avg::bench::run_all_reduce_bench(options, *plan);
  INFO(report.status().to_string());
  REQUIRE(report.is_ok());
  INFO(report->wrong_why);
  CHECK_FALSE(report->wrong);
  REQUIRE(report->rounds.size() == 1);
  CHECK(report->max_rel_error <= 1e-6);  // the weighted mean, known in closed form (synthetic_vector.hpp)
  // The links really are slow: every peer's link carries 2 × 3/4 of 4 MiB each way at 12.5 MB/s (0.5 s),
  // and the round needs at least one round trip.
  CHECK(report->median_seconds >= 0.5);
}

TEST_CASE("Lab: a lab whose process was SIGKILLed is cleaned up by name", "[proc][lab]") {
  make_lab_or_skip(1);
  const std::string lab = test::binary_path("tools/dedloc-lab/dedloc-lab");
  // `dedloc-lab up` in the background, SIGKILLed once it is ready: its namespaces stay behind.
  auto up = test::run_command("'" + lab + "' up --hosts 2 > /tmp/dedloc-lab-killed.out 2>&1 & pid=$!; "
                              "for i in $(seq 100); do grep -q ready /tmp/dedloc-lab-killed.out && break; sleep 0.1; done; "
                              "kill -KILL $pid; wait $pid 2>/dev/null; grep -o 'dlab[0-9]*-[0-9]*' /tmp/dedloc-lab-killed.out");
  INFO(up.output);
  REQUIRE(up.output.find("dlab") != std::string::npos);
  const std::string leftover = up.output.substr(up.output.find("dlab"), up.output.find('\n') - up.output.find("dlab"));
  CHECK(test::run_command("test -e /run/netns/" + leftover).exit_code == 0);
  auto clean = test::run_command("'" + lab + "' clean");
  CHECK(clean.exit_code == 0);
  CHECK(test::run_command("test -e /run/netns/" + leftover).exit_code != 0);
}
