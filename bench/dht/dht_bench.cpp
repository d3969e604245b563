// The dedloc side of bench/dht (run.sh puts OpenDHT beside it): N nodes in this process on loopback, then
// 1,000 keys of 100 bytes stored one at a time from random nodes and read back one at a time from other
// random nodes. Prints one JSON object, the same shape opendht_bench.py prints:
//   {"impl":"dedloc","nodes":64,"keys":1000,"value_bytes":100,"bootstrap_s":..,"put_ms":{"median":..,"p99":..},
//    "get_ms":{..},"put_ops_per_s":..,"get_ops_per_s":..,"put_ok":..,"get_ok":..,"rss_kib_per_node":..}
// plus (dedloc only) "rpcs_per_put" and "rpcs_per_get"; "rss_kib_per_node_joined", the same after joining and
// before any store; "connections_per_node", the outgoing connections open at the end; "connects_per_op", the
// connections opened per put or get; and "max_connections_per_node", the bound on each node's open connections
// it ran with (--max-connections, or lower where LocalSwarm had to fit the descriptor limit; 0: none);
// "datagram_retransmits" and "datagram_calls_streamed", requests sent again and calls that went over ZeroMQ
// (--datagrams, on by default; "impl" is "dedloc-zmq" with it off); "entries_handed_over", the records nodes
// copied to contacts new to their tables that became replicas of keys they hold (dht/hand_over.hpp; with
// --hand-over false they copy none, and "impl" gets "-no-hand-over").
#include <algorithm>
#include <fstream>
#include <iostream>
#include <random>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "dedloc/dht/local_swarm.hpp"

using namespace dedloc;
using namespace std::chrono_literals;

namespace {

long rss_kib() {
  std::ifstream status("/proc/self/status");
  if (!status) throw std::runtime_error("cannot read /proc/self/status (out of file descriptors?)");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

nlohmann::json summary_ms(std::vector<double> ms) {
  if (ms.empty()) return {{"median", nullptr}, {"p99", nullptr}};
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) { return ms[std::min(ms.size() - 1, static_cast<size_t>(q * static_cast<double>(ms.size())))]; };
  return {{"median", at(0.5)}, {"p99", at(0.99)}};
}

// RPCs sent by every node so far.
std::uint64_t rpcs_sent(dht::LocalSwarm& swarm) {
  std::uint64_t n = 0;
  for (size_t i = 0; i < swarm.size(); ++i) n += swarm.node(i).stats().rpcs_sent;
  return n;
}

// Connections every node has opened so far, and how many are open now.
std::pair<std::uint64_t, size_t> connections(dht::LocalSwarm& swarm) {
  std::uint64_t opened = 0;
  size_t open = 0;
  for (size_t i = 0; i < swarm.size(); ++i) {
    auto client = swarm.node(i).stats().client;
    opened += client.connections_opened;
    open += client.open_connections;
  }
  return {opened, open};
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  size_t nodes = 64, keys = 1000, value_bytes = 100;
  std::uint64_t seed = 1;
  double timeout_s = 10;
  CLI::App app{"dedloc DHT benchmark: store/get latency, bootstrap time and memory of an in-process swarm"};
  app.add_option("--nodes", nodes)->capture_default_str();
  app.add_option("--keys", keys)->capture_default_str();
  app.add_option("--value-bytes", value_bytes)->capture_default_str();
  app.add_option("--seed", seed)->capture_default_str();
  app.add_option("--timeout", timeout_s, "seconds per operation")->capture_default_str();
  double idle_close_s = 60;
  app.add_option("--idle-close", idle_close_s,
                 "seconds before a node closes an unused connection (a process's descriptor limit may need less "
                 "for big in-process swarms)")
      ->capture_default_str();
  size_t max_connections = dht::NodeOptions{}.max_connections;
  app.add_option("--max-connections", max_connections,
                 "outgoing connections a node keeps open at most (0: no bound; LocalSwarm lowers it to fit the "
                 "descriptor limit)")
      ->capture_default_str();
  bool datagrams = dht::NodeOptions{}.datagrams;
  app.add_option("--datagrams", datagrams,
                 "nodes talk in UDP datagrams (false: every RPC over ZeroMQ connections, as before datagrams)")
      ->capture_default_str();
  bool hand_over = dht::NodeOptions{}.hand_over;
  app.add_option("--hand-over", hand_over,
                 "nodes copy a node new to their tables the keys it became a replica of (false: they do not; "
                 "\"impl\" is then \"dedloc-no-hand-over\")")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  Logger quiet(LogLevel::kError);
  dht::NodeOptions options;
  options.log = &quiet;
  options.maintenance_interval = Duration::zero();  // no background traffic while measuring
  options.idle_connection_close = from_seconds(idle_close_s);
  options.max_connections = max_connections;
  options.datagrams = datagrams;
  options.hand_over = hand_over;

  long rss_before = rss_kib();
  auto started = std::chrono::steady_clock::now();
  auto swarm = dht::LocalSwarm::launch(nodes, options, seed);
  if (!swarm) {
    std::cerr << "launch failed: " << swarm.status().to_string() << "\n";
    return 1;
  }
  double bootstrap_s = ms_since(started) / 1000;
  long rss_joined = rss_kib();

  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> any_node(0, nodes - 1);
  std::uniform_int_distribution<int> any_byte(0, 255);
  std::vector<Bytes> values(keys);
  std::vector<size_t> putter(keys);
  std::vector<double> put_ms, get_ms;
  size_t put_ok = 0, get_ok = 0;
  double expiration = SystemClock::instance().unix_seconds() + 3600;

  std::uint64_t rpcs_before_puts = rpcs_sent(**swarm);
  std::uint64_t connects_before_puts = connections(**swarm).first;
  auto puts_started = std::chrono::steady_clock::now();
  for (size_t k = 0; k < keys; ++k) {
    values[k].resize(value_bytes);
    for (auto& b : values[k]) b = static_cast<std::uint8_t>(any_byte(rng));
    putter[k] = any_node(rng);
    auto t = std::chrono::steady_clock::now();
    auto stored = (*swarm)->node(putter[k]).store("bench-" + std::to_string(k), std::nullopt, values[k], expiration,
                                                   Deadline::after(std::chrono::duration_cast<Duration>(
                                                       std::chrono::duration<double>(timeout_s))));
    put_ms.push_back(ms_since(t));
    put_ok += stored.is_ok() ? 1 : 0;
  }
  double puts_s = ms_since(puts_started) / 1000;
  std::uint64_t rpcs_after_puts = rpcs_sent(**swarm);

  auto gets_started = std::chrono::steady_clock::now();
  for (size_t k = 0; k < keys; ++k) {
    size_t getter = any_node(rng);
    while (nodes > 1 && getter == putter[k]) getter = any_node(rng);
    auto t = std::chrono::steady_clock::now();
    auto record = (*swarm)->node(getter).get("bench-" + std::to_string(k), dht::GetMode::kFirst,
                                              Deadline::after(std::chrono::duration_cast<Duration>(
                                                  std::chrono::duration<double>(timeout_s))));
    get_ms.push_back(ms_since(t));
    if (record.is_ok() && record->has_value() && (*record)->entries.size() == 1 &&
        (*record)->entries[0].value == values[k]) {
      ++get_ok;
    }
  }
  double gets_s = ms_since(gets_started) / 1000;
  std::uint64_t rpcs_after_gets = rpcs_sent(**swarm);
  auto [connects_after_gets, open_at_end] = connections(**swarm);

  // The bound each node ran with: ours, or the descriptor limit's when lower (0: none).
  size_t bound = (*swarm)->max_connections_per_node();
  if (bound == 0 || (max_connections != 0 && max_connections < bound)) bound = max_connections;
  std::uint64_t retransmits = 0, streamed = 0, handed_over = 0;
  for (size_t i = 0; i < nodes; ++i) {
    const auto stats = (*swarm)->node(i).stats();
    retransmits += stats.datagrams.retransmits;
    streamed += stats.datagrams.streamed;
    handed_over += stats.entries_handed_over;
  }
  std::string impl = datagrams ? "dedloc" : "dedloc-zmq";
  if (!hand_over) impl += "-no-hand-over";
  nlohmann::json out{{"impl", impl},
                     {"nodes", nodes},
                     {"keys", keys},
                     {"value_bytes", value_bytes},
                     {"bootstrap_s", bootstrap_s},
                     {"put_ms", summary_ms(put_ms)},
                     {"get_ms", summary_ms(get_ms)},
                     {"put_ops_per_s", static_cast<double>(keys) / puts_s},
                     {"get_ops_per_s", static_cast<double>(keys) / gets_s},
                     {"put_ok", put_ok},
                     {"get_ok", get_ok},
                     {"rpcs_per_put", static_cast<double>(rpcs_after_puts - rpcs_before_puts) / static_cast<double>(keys)},
                     {"rpcs_per_get", static_cast<double>(rpcs_after_gets - rpcs_after_puts) / static_cast<double>(keys)},
                     {"connects_per_op", static_cast<double>(connects_after_gets - connects_before_puts) / static_cast<double>(2 * keys)},
                     {"connections_per_node", static_cast<double>(open_at_end) / static_cast<double>(nodes)},
                     {"max_connections_per_node", bound},
                     {"datagram_retransmits", retransmits},
                     {"datagram_calls_streamed", streamed},
                     {"entries_handed_over", handed_over},
                     {"rss_kib_per_node_joined", static_cast<double>(rss_joined - rss_before) / static_cast<double>(nodes)},
                     {"rss_kib_per_node", static_cast<double>(rss_kib() - rss_before) / static_cast<double>(nodes)}};
  std::cout << out.dump() << std::endl;
  return 0;
}
