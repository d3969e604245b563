// The DHT at scale in one process: 64 nodes on real loopback sockets, 30% of them crashing
// (docs/architecture.md). Its own binary because ctest runs it alone (RUN_SERIAL): 64 nodes and 8 getter
// threads fill this machine's two cores, and a training process beside it starves live nodes past the
// 1 s RPC deadline, which the test would read as lost records.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>

#include "net/dht_test_support.hpp"

using namespace dedloc;
using namespace dedloc::dht;
using namespace dedloc::test;
using namespace std::chrono_literals;

namespace {

// Gets every key from every listed node, spread over threads. Returns how many gets found the right value.
size_t get_everywhere(LocalSwarm& swarm, const std::vector<size_t>& nodes, size_t keys, size_t threads = 8) {
  std::atomic<size_t> next{0};
  std::atomic<size_t> found{0};
  std::vector<std::thread> workers;
  for (size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      for (size_t job = next++; job < nodes.size() * keys; job = next++) {
        size_t key = job % keys;
        auto record = swarm.node(nodes[job / keys]).get("key-" + std::to_string(key), GetMode::kFirst,
                                                       Deadline::after(10s));
        if (record.is_ok() && record->has_value() && (*record)->entries.size() == 1 &&
            text_of((*record)->entries[0].value) == "value-" + std::to_string(key)) {
          ++found;
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  return found;
}

}  // namespace

TEST_CASE("64 nodes: 500 keys from random nodes, every key from every node, then 30% crash", "[net][dht]") {
  constexpr size_t kNodes = 64;
  constexpr size_t kKeys = 500;
  auto swarm = launch(kNodes);
  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> any_node(0, kNodes - 1);

  for (size_t key = 0; key < kKeys; ++key) {
    auto stored = swarm->node(any_node(rng)).store("key-" + std::to_string(key), std::nullopt,
                                                   bytes_of("value-" + std::to_string(key)), in_an_hour(),
                                                   Deadline::after(10s));
    REQUIRE(stored.is_ok());
    CHECK(stored->stored >= 5);  // the 5 nearest took it (and nodes met on the way keep a copy)
  }

  std::vector<size_t> everyone = swarm->alive_nodes();
  CHECK(get_everywhere(*swarm, everyone, kKeys) == kNodes * kKeys);

  // 30% of the nodes crash (sockets closed, no goodbye).
  std::vector<size_t> order = everyone;
  std::shuffle(order.begin(), order.end(), rng);
  for (size_t i = 0; i < kNodes * 3 / 10; ++i) swarm->kill(order[i]);
  auto survivors = swarm->alive_nodes();
  REQUIRE(survivors.size() == kNodes - kNodes * 3 / 10);

  // One re-store cycle: every survivor re-stores what it holds to the nodes now nearest to each key.
  // (All at once, as a real swarm's maintenance timers would.)
  std::vector<std::thread> republishers;
  for (size_t i : survivors) republishers.emplace_back([&, i] { swarm->node(i).republish(Deadline::after(60s)); });
  for (auto& t : republishers) t.join();

  size_t found = get_everywhere(*swarm, survivors, kKeys);
  INFO(found << " of " << survivors.size() * kKeys << " gets succeeded");
  CHECK(found >= survivors.size() * kKeys * 99 / 100);

  // Dead nodes were met (their RPCs failed), yet no RPC waited longer than its deadline.
  std::uint64_t failed = 0;
  for (size_t i : survivors) {
    auto stats = swarm->node(i).stats();
    failed += stats.rpcs_failed;
    CHECK(stats.longest_rpc_wait <= kRpcTimeoutWithSlack);
  }
  CHECK(failed > 0);
}
