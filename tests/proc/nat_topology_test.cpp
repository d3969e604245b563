// The NAT test network (scripts/nat-topology): a public namespace and two homes behind NAT routers, proven
// real with dedloc-dht processes. Dialling out of a home works (the router rewrites the home's datagrams
// to its public address); dialling into a home fails from the internet and from the other home, and even
// with a route into the home's LAN the router's firewall drops the connection (opened, the same dial works).
// Needs root and network namespaces: where this machine cannot build the topology, the test prints
// "SKIPPED: <reason>" and exits with 77, which ctest reports as skipped (SKIP_CODE 77 in tests/CMakeLists.txt).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "support/nat_topology.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;
using namespace std::chrono_literals;

namespace {

std::string dht_binary() { return test::binary_path("tools/dedloc-dht/dedloc-dht"); }

// `dedloc-dht serve` inside namespace `ns`; returns the process and its address tcp://HOST:PORT/k/KEY.
std::pair<test::ChildProcess, std::string> serve_in(const std::string& ns, std::vector<std::string> args) {
  std::vector<std::string> argv{test::ip_binary(), "netns", "exec", ns, dht_binary(), "--log-level", "warning", "serve"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto [child, json] = test::start_ready(argv, 15s);
  REQUIRE(json["role"] == "dht");
  return {std::move(child), json["endpoints"][0].get<std::string>()};
}

// A dedloc-dht command started in `ns` (stdout and stderr together), finished by finish(): several run at
// once, so that the dials that must time out cost their timeout once.
struct Probe {
  std::string what;
  test::ChildProcess child;
};

Probe start_in(const std::string& ns, const std::string& what, const std::string& dht_args) {
  // exec all the way down (sh, then ip netns exec): the pid is dedloc-dht's, which the destructor kills.
  std::string command = "exec '" + test::ip_binary() + "' netns exec " + ns + " '" + dht_binary() + "' " + dht_args + " 2>&1";
  return Probe{what, test::ChildProcess::spawn({"/bin/sh", "-c", command})};
}

Probe dial_from(const std::string& ns, const std::string& what, const std::string& address) {
  return start_in(ns, what, "--log-level error peers --timeout 2 --initial-peers " + address);
}

struct ProbeResult {
  std::optional<int> exit_code;  // nullopt: still running after the deadline (then killed)
  std::string output;
};

ProbeResult finish(Probe& probe) {
  ProbeResult result;
  auto deadline = Deadline::after(10s);
  while (!deadline.passed()) {
    auto line = probe.child.read_line(deadline.remaining());
    if (!line) break;
    result.output += *line + "\n";
  }
  result.exit_code = probe.child.wait(2s);
  if (!result.exit_code) probe.child.kill(SIGKILL);
  return result;
}

// "tcp://10.231.1.2:4567/k/KEY" with the host replaced: the same node's port as seen at another address.
std::string with_host(const std::string& address, const std::string& host) {
  auto start = address.find("://") + 3;
  auto colon = address.find(':', start);
  return address.substr(0, start) + host + address.substr(colon);
}

std::string port_of(const std::string& address) {
  auto start = address.find("://") + 3;
  auto colon = address.find(':', start);
  auto slash = address.find('/', colon);
  return address.substr(colon + 1, slash - colon - 1);
}

std::string in_ns(const std::string& ns, const std::string& command) {
  return "'" + test::ip_binary() + "' netns exec " + ns + " " + command;
}

}  // namespace

TEST_CASE("NAT topology: homes dial out through their routers, nobody dials in", "[proc][nat]") {
  test::skip_unless_namespaces();
  test::NatTopology net("dnat" + std::to_string(::getpid()));
  const auto& pub = net["PUB_NS"];
  const auto& home1 = net["HOME1_NS"];
  const auto& home2 = net["HOME2_NS"];

  // The public bootstrap node, and a node in home 1 that joins it: dialling out works through NAT.
  // --client-mode: a full node refuses to start there, as the probes below check.
  auto [pub_node, pub_address] = serve_in(pub, {"--listen", "tcp://" + net["PUB_ADDR"] + ":0"});
  auto [home1_node, home1_address] = serve_in(
      home1, {"--client-mode", "--listen", "tcp://" + net["HOME1_ADDR"] + ":0", "--initial-peers", pub_address});
  REQUIRE(home1_address.find("tcp://" + net["HOME1_ADDR"] + ":") == 0);

  // Home 1's datagrams to the public node (DHT nodes talk in UDP) left through router 1, which rewrote their
  // source to its public address: its connection tracking holds the flow, home 1's LAN address on the way
  // out, and the public node answering router 1's public address on the way back.
  auto flows = test::run_command(in_ns(net["R1_NS"], "cat /proc/net/nf_conntrack"));
  INFO("router 1's tracked flows:\n" << flows.output);
  REQUIRE(flows.exit_code == 0);
  const std::string port = port_of(pub_address);
  const std::string out = "src=" + net["HOME1_ADDR"] + " dst=" + net["PUB_ADDR"] + " sport=";
  const std::string back = "src=" + net["PUB_ADDR"] + " dst=" + net["R1_PUBLIC_ADDR"] + " sport=" + port + " ";
  bool masqueraded = false;
  std::istringstream lines(flows.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" udp ") != std::string::npos && line.find(out) != std::string::npos &&
        line.find("dport=" + port + " ") != std::string::npos && line.find(back) != std::string::npos) {
      masqueraded = true;
    }
  }
  CHECK(masqueraded);

  std::vector<Probe> reachable;
  reachable.push_back(dial_from(home1, "home1 -> pub", pub_address));
  reachable.push_back(dial_from(home2, "home2 -> pub", pub_address));
  for (auto& probe : reachable) {
    auto result = finish(probe);
    INFO(probe.what << ":\n" << result.output);
    CHECK(result.exit_code == 0);
  }

  // Dialling in fails: home 1's node at its LAN address (no route to it outside), and at router 1's public
  // address with the same port (no port forwarding: the router drops it), from the internet and from the
  // other home. A full (not client-mode) node in home 2 finds that the bootstrap node cannot dial it back.
  const auto home1_at_router = with_host(home1_address, net["R1_PUBLIC_ADDR"]);
  std::vector<Probe> unreachable;
  unreachable.push_back(dial_from(pub, "pub -> home1's LAN address", home1_address));
  unreachable.push_back(dial_from(pub, "pub -> router1's public address", home1_at_router));
  unreachable.push_back(dial_from(home2, "home2 -> home1's LAN address", home1_address));
  unreachable.push_back(dial_from(home2, "home2 -> router1's public address", home1_at_router));
  unreachable.push_back(start_in(home2, "a full node in home2 joining pub",
                                 "--log-level warning serve --listen tcp://" + net["HOME2_ADDR"] +
                                     ":0 --initial-peers " + pub_address));
  for (auto& probe : unreachable) {
    auto result = finish(probe);
    INFO(probe.what << ":\n" << result.output);
    CHECK(result.exit_code.has_value());
    CHECK(result.exit_code != 0);
    CHECK(result.output.find("\"ready\":true") == std::string::npos);
  }

  // The router's firewall, not only the missing route: with a route into home 1's LAN via router 1, the
  // dial still fails (router 1 drops connections opened from the internet side)...
  auto route = test::run_command("'" + test::ip_binary() + "' -n " + pub + " route add " + net["HOME1_NET"] + " via " +
                                 net["R1_PUBLIC_ADDR"]);
  INFO(route.output);
  REQUIRE(route.exit_code == 0);
  {
    auto probe = dial_from(pub, "pub -> home1 with a route, firewall on", home1_address);
    auto result = finish(probe);
    INFO(probe.what << ":\n" << result.output);
    CHECK(result.exit_code.has_value());
    CHECK(result.exit_code != 0);
  }
  // ...and with the firewall opened for it, the same dial works: the failure above was the firewall's.
  auto open = test::run_command(in_ns(net["R1_NS"], "nft insert rule ip nat_topology forward iifname wan0 oifname lan0 accept"));
  INFO(open.output);
  REQUIRE(open.exit_code == 0);
  {
    auto probe = dial_from(pub, "pub -> home1 with a route, firewall opened", home1_address);
    auto result = finish(probe);
    INFO(probe.what << ":\n" << result.output);
    CHECK(result.exit_code == 0);
  }
}
