// DHT nodes in one process on real loopback sockets (docs/architecture.md).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <map>
#include <random>
#include <thread>

#include "dedloc/dht/local_swarm.hpp"
#include "dedloc/dht/record.hpp"
#include "dedloc/wire/messages.hpp"
#include "net/dht_test_support.hpp"
#include "support/offset_clock.hpp"

using namespace dedloc;
using namespace dedloc::dht;
using namespace std::chrono_literals;
using namespace dedloc::test;

namespace {

// Stores "k" from node 0, kills every replica but the one nearest to the key (the one every lookup for it
// ends at) and returns a live node that holds nothing, to read it.
size_t kill_replicas_but_the_nearest(LocalSwarm& swarm) {
  REQUIRE(swarm.node(0).store("k", std::nullopt, bytes_of("v"), in_an_hour(), Deadline::after(10s)).is_ok());
  std::vector<size_t> holders;
  for (size_t i = 0; i < swarm.size(); ++i) {
    if (swarm.node(i).stored_keys() > 0) holders.push_back(i);
  }
  REQUIRE(holders.size() >= 5);  // the 5 nearest, plus any node the storing lookup met on the way
  const PeerId key = key_id("k");
  std::sort(holders.begin(), holders.end(), [&](size_t a, size_t b) {
    return closer_to(key, swarm.node(a).id(), swarm.node(b).id());
  });
  for (size_t i = 1; i < holders.size(); ++i) swarm.kill(holders[i]);
  size_t asker = 0;
  while (!swarm.alive(asker) || swarm.node(asker).stored_keys() > 0) ++asker;
  return asker;
}

}  // namespace

TEST_CASE("A get asks past dead nodes within the RPC deadline", "[net][dht]") {
  auto swarm = launch(16);
  const size_t asker = kill_replicas_but_the_nearest(*swarm);
  auto started = std::chrono::steady_clock::now();
  auto record = swarm->node(asker).get("k", GetMode::kFirst, Deadline::after(20s));
  auto took = std::chrono::steady_clock::now() - started;
  REQUIRE(record.is_ok());
  REQUIRE(record->has_value());
  CHECK(text_of((*record)->entries.at(0).value) == "v");
  CHECK(swarm->node(asker).stats().longest_rpc_wait <= kRpcTimeoutWithSlack);
  // The dead replicas were asked in parallel: the get costs about one deadline, not one per dead node.
  CHECK(took < kRpcTimeout * 3);
}

TEST_CASE("A node whose process is gone is known dead in a round trip: no call to it waits for its deadline, "
          "and no connection to it is left retrying", "[net][dht][datagram]") {
  // Its machine is up: the datagram draws "port unreachable" and the call moves to ZeroMQ, whose connection
  // is refused. Calls to it used to wait out their deadlines there, and the connection went on being retried
  // every 100 ms until it had been idle for a minute: under churn, ten connection attempts a second per
  // dead node a process had asked lately.
  auto swarm = launch(16);
  const size_t asker = kill_replicas_but_the_nearest(*swarm);
  auto record = swarm->node(asker).get("k", GetMode::kFirst, Deadline::after(20s));
  REQUIRE(record.is_ok());
  REQUIRE(record->has_value());
  std::this_thread::sleep_for(kRpcTimeoutWithSlack);  // every call of the get has its outcome by now
  const auto stats = swarm->node(asker).stats();
  const auto longest_ms = std::chrono::duration_cast<std::chrono::milliseconds>(stats.longest_rpc_wait).count();
  INFO("failed RPCs " << stats.rpcs_failed << ", ports unreachable " << stats.datagrams.ports_unreachable
                      << ", longest wait " << longest_ms << " ms, connections open " << stats.client.open_connections);
  CHECK(stats.datagrams.ports_unreachable >= 1);  // it asked a dead replica
  CHECK(stats.rpcs_failed >= 1);
  CHECK(stats.longest_rpc_wait < kRpcTimeout * 9 / 10);  // a call waiting out its deadline waits all of it
  CHECK(stats.client.open_connections == 0);
}

TEST_CASE("With half the contacts dead, a join and a get through a live node take about one RPC deadline",
          "[net][dht]") {
  // Node 0 stays up; 5 of the 10 nodes that joined after it crash (their tables' entries stay in the others').
  auto swarm = launch(11);
  for (size_t i = 1; i < swarm->size(); i += 2) swarm->kill(i);
  // A lookup pays a stall time (100 to 250 ms here) per dead node it waits on, and a node does not wait on
  // one again: 0.1 to 0.5 s for the join and for the whole client below. A lookup that waited on each dead
  // node it met, a deadline per round of queries and again in every lookup, took 1 to 3 s for the join and
  // 4 to 7 s for the client. The bound leaves room for a loaded machine.
  const auto bound = kRpcTimeout * 3 / 2;
  REQUIRE(swarm->node(2).store("k", std::nullopt, bytes_of("v"), in_an_hour(), Deadline::after(10s)).is_ok());

  // A one-shot client (what `dedloc-dht get` runs): join through node 0, three gets of missing keys, then a
  // stored key, which must still be found.
  zmq::context_t context;
  auto started = std::chrono::steady_clock::now();
  auto client = join_as_client(context, crypto::Identity::generate(), {swarm->node(0).address()},
                               Deadline::after(10s), {}, quiet_options());
  REQUIRE(client.is_ok());
  auto joined = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) {
    auto missing = (*client)->get("nobody-stored-this-" + std::to_string(i), GetMode::kFirst, Deadline::after(10s));
    REQUIRE(missing.is_ok());
    CHECK_FALSE(missing->has_value());
  }
  auto found = (*client)->get("k", GetMode::kFirst, Deadline::after(10s));
  auto done = std::chrono::steady_clock::now();
  REQUIRE(found.is_ok());
  REQUIRE(found->has_value());
  CHECK(text_of((*found)->entries.at(0).value) == "v");
  INFO("joined in " << to_ms(joined - started) << " ms, four gets in " << to_ms(done - joined) << " ms");
  CHECK(done - started < bound);

  // A serving node joining through node 0 (a lookup of its own id among the same dead contacts).
  started = std::chrono::steady_clock::now();
  auto added = swarm->join(quiet_options(), 0);
  auto took = std::chrono::steady_clock::now() - started;
  REQUIRE(added.is_ok());
  INFO("a serving node joined in " << to_ms(took) << " ms");
  CHECK(took < bound);
  (*client)->stop();
}

TEST_CASE("A get that hears from no node is an error, not an empty record", "[net][dht]") {
  auto swarm = launch(4);
  // Somebody answered that nobody holds the key: an empty record.
  auto missing = swarm->node(0).get("nobody-stored-this", GetMode::kLatest, Deadline::after(10s));
  REQUIRE(missing.is_ok());
  CHECK_FALSE(missing->has_value());
  // Every other node is dead: not knowing is not "nothing there" (a caller would read "no donors" or "no
  // revocations" where the truth is "cannot tell").
  for (size_t i = 1; i < swarm->size(); ++i) swarm->kill(i);
  auto unknown = swarm->node(0).get("nobody-stored-this", GetMode::kLatest, Deadline::after(10s));
  REQUIRE_FALSE(unknown.is_ok());
  CHECK((unknown.status().code() == Code::kTimeout || unknown.status().code() == Code::kUnavailable));
  CHECK_THAT(unknown.status().message(), Catch::Contains("no DHT node answered"));
  // What this node holds itself is still found without anyone's help.
  REQUIRE(swarm->node(0).store("mine", std::nullopt, bytes_of("v"), in_an_hour(), Deadline::after(5s)).is_ok());
  auto mine = swarm->node(0).get("mine", GetMode::kFirst, Deadline::after(5s));
  REQUIRE(mine.is_ok());
  REQUIRE(mine->has_value());
  CHECK(text_of((*mine)->entries.at(0).value) == "v");
}

TEST_CASE("Dictionaries: subkeys from different nodes merge, --latest sees them all", "[net][dht]") {
  auto swarm = launch(12);
  for (size_t i = 0; i < 6; ++i) {
    REQUIRE(swarm->node(i)
                .store("run_progress", bytes_of("peer-" + std::to_string(i)), bytes_of("step " + std::to_string(i)),
                       in_an_hour() + static_cast<double>(i), Deadline::after(10s))
                .is_ok());
  }
  auto record = swarm->node(11).get("run_progress", GetMode::kLatest, Deadline::after(10s));
  REQUIRE(record.is_ok());
  REQUIRE(record->has_value());
  REQUIRE((*record)->entries.size() == 6);
  CHECK(text_of(*(*record)->entries[3].subkey) == "peer-3");
  CHECK(text_of((*record)->entries[3].value) == "step 3");

  // A newer value replaces an older one; an older one is refused by every replica.
  double later = in_an_hour() + 100;
  REQUIRE(swarm->node(2).store("plain", std::nullopt, bytes_of("new"), later, Deadline::after(10s)).is_ok());
  auto older = swarm->node(3).store("plain", std::nullopt, bytes_of("old"), later - 50, Deadline::after(10s));
  REQUIRE_FALSE(older.is_ok());
  CHECK(older.status().code() == Code::kRefused);
  auto plain = swarm->node(7).get("plain", GetMode::kLatest, Deadline::after(10s));
  REQUIRE(plain.is_ok());
  REQUIRE(plain->has_value());
  CHECK(text_of((*plain)->entries.at(0).value) == "new");
}

TEST_CASE("Latest reads: a replica sends a reader only what was stored since its last read there", "[net][dht]") {
  auto swarm = launch(12);
  auto served = [&] {
    std::uint64_t entries = 0;
    for (size_t i = 0; i < swarm->size(); ++i) entries += swarm->node(i).stats().entries_served;
    return entries;
  };
  auto read_all = [&](size_t reader) {
    auto record = swarm->node(reader).get("run_progress", GetMode::kLatest, Deadline::after(10s));
    REQUIRE(record.is_ok());
    REQUIRE(record->has_value());
    std::map<std::string, std::string> values;
    for (const auto& e : (*record)->entries) values[text_of(*e.subkey)] = text_of(e.value);
    return values;
  };
  for (size_t i = 0; i < 30; ++i) {
    REQUIRE(swarm->node(i % 10)
                .store("run_progress", bytes_of("peer-" + std::to_string(i)), bytes_of("epoch 1"), in_an_hour(),
                       Deadline::after(10s))
                .is_ok());
  }
  auto before = served();
  auto first = read_all(11);
  CHECK(first.size() == 30);
  const auto first_read = served() - before;
  CHECK(first_read >= 90);  // every node asked sent all it holds: at least the 5 replicas' 30 entries, most of them

  // Nothing changed: the same record, and nothing sent by the nodes read before. (A lookup may meet a node
  // it did not ask the first time, which sends all it holds: the bounds below leave room for one.)
  before = served();
  CHECK(read_all(11) == first);
  CHECK(served() - before <= 30);

  REQUIRE(swarm->node(3)
              .store("run_progress", bytes_of("peer-3"), bytes_of("epoch 2"), in_an_hour() + 10, Deadline::after(10s))
              .is_ok());
  before = served();
  auto third = read_all(11);
  CHECK(served() - before <= first_read / 30 + 2 + 30);  // one entry per node read before: the one that changed
  CHECK(third.size() == 30);
  CHECK(third.at("peer-3") == "epoch 2");
  CHECK(third.at("peer-4") == "epoch 1");

  // Another reader starts from nothing and is sent everything.
  before = served();
  CHECK(read_all(10) == third);
  CHECK(served() - before >= 30);
}

TEST_CASE("Owned entries: only the owner writes them, and nobody overwrites, extends or deletes them", "[net][dht]") {
  auto swarm = launch(8);
  auto owner = crypto::Identity::generate();
  zmq::context_t context;
  Node owner_node(context, owner, quiet_options());
  REQUIRE(owner_node.start().is_ok());
  REQUIRE(owner_node.bootstrap({swarm->node(0).address()}, Deadline::after(10s)).is_ok());

  Bytes subkey = bytes_of(owner_marker(owner.public_key()));
  REQUIRE(owner_node.store("run_metrics", subkey, bytes_of("loss 1.5"), in_an_hour(), Deadline::after(10s)).is_ok());

  // Another node cannot write (or extend) the owner's subkey: it has no key to sign with.
  auto forged = swarm->node(3).store("run_metrics", subkey, bytes_of("loss 0.0"), in_an_hour() + 60, Deadline::after(10s));
  REQUIRE_FALSE(forged.is_ok());
  CHECK(forged.status().code() == Code::kUnauthorized);

  // A hostile peer that skips the checks and sends a forged store straight to a replica is refused there.
  wire::RecordEntry entry{subkey, bytes_of("loss 0.0"), in_an_hour() + 60, Bytes(64, 0x42)};
  net::Client raw(context, {});
  auto reply = raw.call(swarm->node(5).endpoint(), net::Outgoing::of(wire::DhtStore{"run_metrics", entry, ""}),
                        Deadline::after(5s))
                   .wait();
  REQUIRE_FALSE(reply.is_ok());
  CHECK(reply.status().code() == Code::kUnauthorized);

  // Nor delete it: the DHT has no delete, and neither an owner's older entry replayed (signed, but expiring
  // sooner) nor an already expired one replaces what a replica holds. (A node that holds nothing takes the
  // older entry, and a get merges the newest per subkey, so it changes nothing either.)
  wire::RecordEntry older{subkey, bytes_of("loss 9.9"), in_an_hour() - 600, {}};
  REQUIRE(sign_entry(owner, "run_metrics", older).is_ok());
  wire::RecordEntry expired{subkey, bytes_of(""), SystemClock::instance().unix_seconds() - 1, {}};
  REQUIRE(sign_entry(owner, "run_metrics", expired).is_ok());
  for (const auto& replayed : {older, expired}) {
    for (size_t i = 0; i < swarm->size(); ++i) {
      if (swarm->node(i).stored_keys() == 0) continue;  // not a replica
      auto refused = raw.call(swarm->node(i).endpoint(), net::Outgoing::of(wire::DhtStore{"run_metrics", replayed, ""}),
                              Deadline::after(5s))
                         .wait();
      CHECK(refused.status().code() == Code::kRefused);
    }
  }

  auto record = swarm->node(6).get("run_metrics", GetMode::kLatest, Deadline::after(10s));
  REQUIRE(record.is_ok());
  REQUIRE(record->has_value());
  CHECK(text_of((*record)->entries.at(0).value) == "loss 1.5");
  owner_node.stop();
}

TEST_CASE("Client-mode nodes query and store but never enter routing tables", "[net][dht]") {
  auto swarm = launch(8);
  zmq::context_t context;
  NodeOptions options = quiet_options();
  options.client_mode = true;
  options.listen = "";
  Node client(context, crypto::Identity::generate(), options);
  REQUIRE(client.start().is_ok());
  REQUIRE(client.bootstrap({swarm->node(0).address()}, Deadline::after(10s)).is_ok());
  REQUIRE(client.store("from-client", std::nullopt, bytes_of("hi"), in_an_hour(), Deadline::after(10s)).is_ok());
  auto record = swarm->node(4).get("from-client", GetMode::kFirst, Deadline::after(10s));
  REQUIRE(record.is_ok());
  REQUIRE(record->has_value());
  CHECK(text_of((*record)->entries.at(0).value) == "hi");
  for (size_t i = 0; i < swarm->size(); ++i) {
    for (const auto& contact : swarm->node(i).contacts()) CHECK(contact.id != client.id());
  }
  client.stop();
}

TEST_CASE("A node whose every contact went silent finds the swarm again once they answer", "[net][dht]") {
  // Three servers a client joined through the first; all three stop (from the client's side, what its own
  // link going down looks like), so that each of its contacts misses its deadline twice and leaves its
  // table. Two come back at the same addresses with the same keys, the initial peer does not: the client
  // finds them among the contacts it dropped, with no bootstrap of its own.
  zmq::context_t context;
  std::vector<crypto::Identity> identities;
  std::vector<std::string> endpoints;
  std::vector<std::unique_ptr<Node>> servers;
  auto serve = [&](size_t i) {
    NodeOptions options = quiet_options();
    options.listen = endpoints[i];
    servers[i] = std::make_unique<Node>(context, identities[i], options);
    REQUIRE(servers[i]->start().is_ok());
  };
  for (size_t i = 0; i < 3; ++i) {
    identities.push_back(crypto::Identity::generate());
    endpoints.push_back("tcp://127.0.0.1:0");
    servers.emplace_back();
    serve(i);
    endpoints[i] = servers[i]->endpoint();  // the port it got, to come back on
    if (i > 0) REQUIRE(servers[i]->bootstrap({servers[0]->address()}, Deadline::after(10s)).is_ok());
  }
  NodeOptions options = quiet_options();
  options.client_mode = true;
  options.listen = "";
  Node client(context, crypto::Identity::generate(), options);
  REQUIRE(client.start().is_ok());
  REQUIRE(client.bootstrap({servers[0]->address()}, Deadline::after(10s)).is_ok());
  REQUIRE(client.store("k", std::nullopt, bytes_of("before"), in_an_hour(), Deadline::after(10s)).is_ok());
  REQUIRE(client.contacts().size() == 3);

  for (auto& server : servers) server.reset();
  for (int attempt = 0; attempt < 4 && !client.contacts().empty(); ++attempt) {
    CHECK_FALSE(client.get("k", GetMode::kFirst, Deadline::after(5s)).is_ok());
  }
  REQUIRE(client.contacts().empty());

  serve(1);
  serve(2);
  REQUIRE(servers[2]->bootstrap({servers[1]->address()}, Deadline::after(10s)).is_ok());
  // The first operation after they are back pings the dropped contacts (after at most one RPC deadline
  // since the last attempt) and goes on through whoever answered.
  std::this_thread::sleep_for(kRpcTimeout);
  auto stored = client.store("k", std::nullopt, bytes_of("after"), in_an_hour() + 1, Deadline::after(10s));
  REQUIRE(stored.is_ok());
  CHECK(stored->stored >= 1);
  // The other one's answer to the same round of pings puts it back too (a lookup may have passed it over
  // meanwhile: it had failed twice, and a lookup does not wait on such a node until it answers).
  const auto until = std::chrono::steady_clock::now() + kRpcTimeoutWithSlack;
  while (client.contacts().size() < 2 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(10ms);
  CHECK(client.contacts().size() == 2);
  auto record = servers[2]->get("k", GetMode::kFirst, Deadline::after(10s));
  REQUIRE(record.is_ok());
  REQUIRE(record->has_value());
  CHECK(text_of((*record)->entries.at(0).value) == "after");
}

TEST_CASE("Bootstrap errors say what is wrong and what to do", "[net][dht]") {
  auto swarm = launch(3);
  zmq::context_t context;

  SECTION("nobody answers") {
    Node node(context, crypto::Identity::generate(), quiet_options());
    REQUIRE(node.start().is_ok());
    auto status = node.bootstrap({net::PeerAddress::parse("tcp://127.0.0.1:1").value()}, Deadline::after(5s));
    CHECK(status.code() == Code::kUnavailable);
    CHECK_THAT(status.message(), Catch::Contains("none of the initial peers answered"));
  }
  SECTION("the address names another peer") {
    Node node(context, crypto::Identity::generate(), quiet_options());
    REQUIRE(node.start().is_ok());
    net::PeerAddress wrong{swarm->node(0).endpoint(), swarm->node(1).id()};
    auto status = node.bootstrap({wrong}, Deadline::after(5s));
    CHECK(status.code() == Code::kUnavailable);
    CHECK_THAT(status.message(), Catch::Contains("answered as peer"));
  }
  SECTION("our clock is a minute off") {
    test::OffsetClock skewed(60);
    NodeOptions options = quiet_options();
    options.clock = &skewed;
    Node node(context, crypto::Identity::generate(), options);
    REQUIRE(node.start().is_ok());
    auto status = node.bootstrap({swarm->node(0).address()}, Deadline::after(5s));
    CHECK(status.code() == Code::kRefused);
    CHECK_THAT(status.message(), Catch::Contains("clock"));
    CHECK_THAT(status.message(), Catch::Contains("behind"));
  }
  SECTION("nobody can dial us back") {
    NodeOptions options = quiet_options();
    options.announce = "tcp://127.0.0.1:1";  // what a node behind NAT would advertise: unreachable
    Node node(context, crypto::Identity::generate(), options);
    REQUIRE(node.start().is_ok());
    auto status = node.bootstrap({swarm->node(0).address()}, Deadline::after(10s));
    CHECK(status.code() == Code::kUnavailable);
    CHECK_THAT(status.message(), Catch::Contains("cannot reach us back"));
    CHECK_THAT(status.message(), Catch::Contains("--client-mode"));
  }
}

TEST_CASE("Nodes talk in datagrams: a swarm stores and reads without holding connections", "[net][dht][datagram]") {
  auto swarm = launch(12);
  for (int k = 0; k < 20; ++k) {
    const std::string key = "small-" + std::to_string(k);
    REQUIRE(swarm->node(k % 12).store(key, std::nullopt, bytes_of("v" + std::to_string(k)), in_an_hour(),
                                      Deadline::after(10s)).is_ok());
  }
  for (int k = 0; k < 20; ++k) {
    auto record = swarm->node((k + 5) % 12).get("small-" + std::to_string(k), GetMode::kFirst, Deadline::after(10s));
    REQUIRE(record.is_ok());
    REQUIRE(record->has_value());
    CHECK(text_of((*record)->entries.at(0).value) == "v" + std::to_string(k));
  }
  std::uint64_t served = 0, opened = 0, zmq_requests = 0;
  for (size_t i = 0; i < swarm->size(); ++i) {
    const auto stats = swarm->node(i).stats();
    served += stats.datagrams.requests;
    opened += stats.client.connections_opened;
    zmq_requests += stats.server.requests;
  }
  CHECK(served > 100);
  CHECK(opened == 0);
  CHECK(zmq_requests == 0);
}

TEST_CASE("Values too large for a datagram are stored and read over ZeroMQ", "[net][dht][datagram]") {
  auto swarm = launch(8);
  Bytes big(40 * 1024);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::uint8_t>(i * 31);
  REQUIRE(swarm->node(0).store("big", std::nullopt, big, in_an_hour(), Deadline::after(10s)).is_ok());
  // A dictionary whose replies outgrow a datagram only as it fills up.
  for (int s = 0; s < 40; ++s) {
    REQUIRE(swarm->node(s % 8).store("dict", bytes_of("sub-" + std::to_string(s)), Bytes(1000, static_cast<std::uint8_t>(s)),
                                     in_an_hour(), Deadline::after(10s)).is_ok());
  }
  auto record = swarm->node(5).get("big", GetMode::kFirst, Deadline::after(10s));
  REQUIRE(record.is_ok());
  REQUIRE(record->has_value());
  CHECK((*record)->entries.at(0).value == big);
  auto dict = swarm->node(6).get("dict", GetMode::kLatest, Deadline::after(10s));
  REQUIRE(dict.is_ok());
  REQUIRE(dict->has_value());
  CHECK((*dict)->entries.size() == 40);
  std::uint64_t streamed = 0;
  for (size_t i = 0; i < swarm->size(); ++i) streamed += swarm->node(i).stats().datagrams.streamed;
  CHECK(streamed > 0);
}

TEST_CASE("With datagrams off, every RPC goes over ZeroMQ as before", "[net][dht][datagram]") {
  auto options = quiet_options();
  options.datagrams = false;
  auto swarm = launch(8, options);
  REQUIRE(swarm->node(0).store("k", std::nullopt, bytes_of("v"), in_an_hour(), Deadline::after(10s)).is_ok());
  auto record = swarm->node(7).get("k", GetMode::kFirst, Deadline::after(10s));
  REQUIRE(record.is_ok());
  REQUIRE(record->has_value());
  std::uint64_t datagram_calls = 0, zmq_requests = 0;
  for (size_t i = 0; i < swarm->size(); ++i) {
    datagram_calls += swarm->node(i).stats().datagrams.calls;
    zmq_requests += swarm->node(i).stats().server.requests;
  }
  CHECK(datagram_calls == 0);
  CHECK(zmq_requests > 0);
}

TEST_CASE("Nodes without datagrams in a swarm with them are called over ZeroMQ, and nothing fails",
          "[net][dht][datagram]") {
  // A swarm during an upgrade: half its nodes take no datagrams (a release before them, or datagrams off).
  // The others learn it from the "port unreachable" answer to their first datagram, and call them over
  // ZeroMQ from then on, so that no lookup waits on a node that is up.
  auto swarm = launch(6);
  auto without = quiet_options();
  without.datagrams = false;
  for (size_t i = 0; i < 6; ++i) REQUIRE(swarm->join(without, i).is_ok());
  for (int k = 0; k < 24; ++k) {
    REQUIRE(swarm->node(k % 12).store("mixed-" + std::to_string(k), std::nullopt, bytes_of("v" + std::to_string(k)),
                                      in_an_hour(), Deadline::after(10s)).is_ok());
  }
  for (size_t reader = 0; reader < 12; ++reader) {
    for (int k = 0; k < 24; ++k) {
      auto record = swarm->node(reader).get("mixed-" + std::to_string(k), GetMode::kLatest, Deadline::after(10s));
      REQUIRE(record.is_ok());
      REQUIRE(record->has_value());
      CHECK(text_of((*record)->entries.at(0).value) == "v" + std::to_string(k));
    }
  }
  std::uint64_t unreachable = 0, failed = 0;
  for (size_t i = 0; i < swarm->size(); ++i) {
    const auto stats = swarm->node(i).stats();
    unreachable += stats.datagrams.ports_unreachable;
    failed += stats.rpcs_failed;
    CHECK(stats.longest_rpc_wait < kRpcTimeout);
  }
  CHECK(unreachable > 0);
  CHECK(failed == 0);
}
