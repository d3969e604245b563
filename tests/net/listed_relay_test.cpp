// The relay as dedloc-relay serve runs it (relay::ListedRelay): listed in a real DHT swarm on loopback
// while it serves, and stopped promptly when asked.
#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <thread>

#include "dedloc/relay/listed_relay.hpp"
#include "dedloc/relay/relay_directory.hpp"
#include "support/quiet_swarm.hpp"

using namespace dedloc;
using namespace std::chrono_literals;

TEST_CASE("ListedRelay: lists itself in the DHT while it serves and stops when asked", "[net][relay]") {
  Logger& quiet = test::quiet_log();
  auto swarm = test::quiet_swarm(2);
  zmq::context_t context;
  auto identity = crypto::Identity::generate();
  relay::ListedRelayOptions options;
  options.relay.listen = "tcp://127.0.0.1:0";
  options.relay.limits.max_peers = 7;
  options.relay.log = &quiet;
  options.initial_peers = {swarm->node(0).address()};
  relay::ListedRelay relay(context, identity, options);
  REQUIRE(relay.start().is_ok());
  CHECK(relay.listed());
  CHECK(relay.address().peer_id == identity.peer_id());
  CHECK_THAT(relay.address().endpoint, Catch::StartsWith("tcp://127.0.0.1:"));

  std::atomic<bool> stop{false};
  auto running = std::async(std::launch::async, [&] { return relay.run([&] { return stop.load(); }); });
  bool found = false;
  const Deadline give_up = Deadline::after(10s);
  while (!found && !give_up.passed()) {
    auto listings = relay::list_relays(swarm->node(1), Deadline::after(2s));
    REQUIRE(listings.is_ok());
    for (const auto& listing : *listings) {
      if (listing.address.to_string() == relay.address().to_string()) {
        found = true;
        CHECK(listing.max_peers == 7);
        CHECK(listing.peers == 0);
      }
    }
    if (!found) std::this_thread::sleep_for(50ms);  // polling for the first listing, not ordering events
  }
  CHECK(found);

  const auto asked = std::chrono::steady_clock::now();
  stop = true;
  REQUIRE(running.wait_for(5s) == std::future_status::ready);
  CHECK(std::chrono::steady_clock::now() - asked < 2s);
  CHECK(running.get().attaches == 0);
}

TEST_CASE("ListedRelay: without initial peers it serves unlisted", "[net][relay]") {
  Logger& quiet = test::quiet_log();
  zmq::context_t context;
  auto identity = crypto::Identity::generate();
  relay::ListedRelayOptions options;
  options.relay.listen = "tcp://127.0.0.1:0";
  options.relay.log = &quiet;
  relay::ListedRelay relay(context, identity, options);
  REQUIRE(relay.start().is_ok());
  CHECK_FALSE(relay.listed());
  std::atomic<int> asked{0};
  auto stats = relay.run([&] { return ++asked > 3; });
  CHECK(stats.attached == 0);
}

TEST_CASE("Relay listings: the least loaded first, the most recently refreshed first among equals", "[net][relay]") {
  // A relay refreshes its listing every ttl/3 with the same ttl, so a dead relay's listing falls behind the
  // live ones' expirations: between equally loaded relays, readers try the one refreshed last first.
  auto swarm = test::quiet_swarm(4);
  auto listing = [&](size_t i, std::uint64_t peers) {
    return relay::RelayListing{.address = swarm->node(i).address(), .peers = peers, .max_peers = 8};
  };
  REQUIRE(relay::advertise_relay(swarm->node(1), listing(1, 2), 60s, Deadline::after(5s)).is_ok());   // stale
  REQUIRE(relay::advertise_relay(swarm->node(2), listing(2, 2), 600s, Deadline::after(5s)).is_ok());  // fresh
  REQUIRE(relay::advertise_relay(swarm->node(3), listing(3, 5), 900s, Deadline::after(5s)).is_ok());  // busier
  auto listed = relay::list_relays(swarm->node(0), Deadline::after(5s));
  REQUIRE(listed.is_ok());
  REQUIRE(listed->size() == 3);
  CHECK((*listed)[0].address.to_string() == swarm->node(2).address().to_string());
  CHECK((*listed)[1].address.to_string() == swarm->node(1).address().to_string());
  CHECK((*listed)[2].address.to_string() == swarm->node(3).address().to_string());
  CHECK((*listed)[0].expiration > (*listed)[1].expiration);
}
