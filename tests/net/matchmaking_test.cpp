// Matchmaking through a real DHT between in-process peers on loopback (docs/architecture.md).
#include <catch2/catch.hpp>

#include <functional>
#include <future>
#include <map>
#include <set>
#include <thread>

#include "dedloc/avg/matchmaking.hpp"
#include "dedloc/dht/local_swarm.hpp"
#include "support/quiet_swarm.hpp"

using namespace dedloc;
using namespace dedloc::avg;
using namespace std::chrono_literals;

namespace {

Logger& quiet() {
  static Logger log(LogLevel::kError);
  return log;
}

// A peer looking for a group: its averaging server and client, on DHT node `i` of a shared swarm.
struct Looker {
  std::unique_ptr<net::Server> server;
  std::unique_ptr<net::Client> client;
  std::unique_ptr<Matchmaker> matchmaker;
  crypto::PeerId id;

  Looker(zmq::context_t& context, dht::Node& dht, MatchmakingOptions options) : id(dht.id()) {
    server = std::make_unique<net::Server>(context, net::ServerOptions{"tcp://127.0.0.1:0", id, {}, &quiet()});
    client = std::make_unique<net::Client>(context, net::ClientOptions{id, {}, 60s, &quiet()});
    matchmaker = std::make_unique<Matchmaker>(dht, *server, *client, id, std::move(options), &quiet());
    REQUIRE(server->start().is_ok());
  }
  ~Looker() { server->stop(); }  // before the matchmaker its handler points into
};

MatchmakingOptions options_for(size_t target, Duration time = 3s) {
  MatchmakingOptions o;
  o.group_key = "run1_grad";
  o.schema_hash = Bytes(wire::kSchemaHashBytes, 0x42);
  o.vector_length = 100000;
  o.target_group_size = target;
  o.min_group_size = 2;
  o.matchmaking_time = time;
  return o;
}

// One Looker on each of the first `n` nodes of `swarm`, each with `options`.
std::vector<std::unique_ptr<Looker>> lookers_on(dht::LocalSwarm& swarm, zmq::context_t& context, size_t n,
                                                const MatchmakingOptions& options) {
  std::vector<std::unique_ptr<Looker>> lookers;
  for (size_t i = 0; i < n; ++i) lookers.push_back(std::make_unique<Looker>(context, swarm.node(i), options));
  return lookers;
}

// find_group in the background, for options_for's schema and length, knowing of `expected` peers.
std::future<Result<Group>> find_in_background(Looker& l, size_t expected) {
  return std::async(std::launch::async, [&l, expected] {
    return l.matchmaker->find_group(Bytes(wire::kSchemaHashBytes, 0x42), 100000, expected);
  });
}

// A latecomer under a one-group key whose group formed: its search, knowing of `expected` peers, ends with
// kRefused within `within`, not alone at its deadline (kTimeout).
void check_stops_at_once(Looker& late, size_t expected, Duration within) {
  const auto started = std::chrono::steady_clock::now();
  auto result = find_in_background(late, expected).get();
  REQUIRE_FALSE(result.is_ok());
  INFO(result.status().to_string());
  CHECK(result.status().code() == Code::kRefused);
  CHECK(std::chrono::steady_clock::now() - started < within);
}

std::vector<Result<Group>> find_all(std::vector<std::unique_ptr<Looker>>& lookers) {
  std::vector<std::future<Result<Group>>> futures;
  for (auto& l : lookers) futures.push_back(std::async(std::launch::async, [&l] { return l->matchmaker->find_group(); }));
  std::vector<Result<Group>> groups;
  for (auto& f : futures) groups.push_back(f.get());
  return groups;
}

// Waits (bounded) until `looker`'s search is in a state the test needs before the next peer starts, so
// that events come in the test's order however long each takes on a loaded machine.
void wait_until(const Looker& looker, const std::function<bool(const Matchmaker::Snapshot&)>& reached,
                Duration limit = 10s) {
  const Deadline deadline = Deadline::after(limit);
  while (!reached(looker.matchmaker->snapshot())) {
    REQUIRE_FALSE(deadline.passed());
    std::this_thread::sleep_for(5ms);
  }
}
bool declared(const Matchmaker::Snapshot& s) { return s.leading && s.declared; }
auto leads(size_t members) {
  return [members](const Matchmaker::Snapshot& s) { return s.leading && s.group_size == members; };
}

// Two pairs side by side: C then D start looking and D joins C; then A then B start (with shorter times, so
// earlier deadlines: they come first in leader order). Returns A's, B's, C's and D's groups.
std::vector<Result<Group>> find_as_two_pairs(Looker& a, Looker& b, Looker& c, Looker& d) {
  auto find = [](Looker& l) { return std::async(std::launch::async, [&l] { return l.matchmaker->find_group(); }); };
  auto fc = find(c);
  wait_until(c, declared);
  auto fd = find(d);
  wait_until(c, leads(2));  // D has joined C
  auto fa = find(a);
  wait_until(a, declared);
  auto fb = find(b);
  std::vector<Result<Group>> groups;
  for (auto* f : {&fa, &fb, &fc, &fd}) groups.push_back(f->get());
  return groups;
}

}  // namespace

TEST_CASE("Matchmaking: 16 peers with target 4 form groups that cover everyone", "[net][avg]") {
  auto swarm = test::quiet_swarm(16);
  zmq::context_t context;
  std::vector<std::unique_ptr<Looker>> lookers;
  for (size_t i = 0; i < 16; ++i) lookers.push_back(std::make_unique<Looker>(context, swarm->node(i), options_for(4)));
  auto groups = find_all(lookers);

  std::map<Bytes, std::vector<crypto::PeerId>> by_id;  // group id -> members, as each member saw it
  std::set<crypto::PeerId> covered;
  for (size_t i = 0; i < groups.size(); ++i) {
    INFO("peer " << i << ": " << (groups[i].is_ok() ? "ok" : groups[i].status().to_string()));
    REQUIRE(groups[i].is_ok());
    const Group& g = *groups[i];
    CHECK(g.size() >= 2);
    CHECK(g.size() <= 4);
    REQUIRE(g.index_of(lookers[i]->id));
    std::vector<crypto::PeerId> ids;
    for (const auto& m : g.members()) ids.push_back(m.id);
    auto [it, fresh] = by_id.emplace(g.id(), ids);
    CHECK(it->second == ids);  // every member of a group got the same BEGIN
    covered.insert(lookers[i]->id);
    // Shares sum to the vector: the leader's plan, identical for all.
    std::uint64_t total = 0;
    for (auto c : g.begin().counts) total += c;
    CHECK(total == 100000);
  }
  CHECK(covered.size() == 16);
  size_t members = 0;
  for (const auto& [id, ids] : by_id) members += ids.size();
  CHECK(members == 16);  // no peer in two groups
}

TEST_CASE("Matchmaking: 16 peers with target 16 form one group", "[net][avg]") {
  auto swarm = test::quiet_swarm(16);
  zmq::context_t context;
  std::vector<std::unique_ptr<Looker>> lookers;
  for (size_t i = 0; i < 16; ++i) lookers.push_back(std::make_unique<Looker>(context, swarm->node(i), options_for(16)));
  auto started = std::chrono::steady_clock::now();
  auto groups = find_all(lookers);
  for (auto& g : groups) {
    REQUIRE(g.is_ok());
    CHECK(g->size() == 16);
    CHECK(g->id() == groups[0]->id());
  }
  // Full groups start at once, without waiting for the deadline.
  CHECK(std::chrono::steady_clock::now() - started < 3s);
}

TEST_CASE("Matchmaking: peers that know the run has 3 of them form a group of 3 long before the deadline",
          "[net][avg]") {
  auto swarm = test::quiet_swarm(3);
  zmq::context_t context;
  const Bytes schema(wire::kSchemaHashBytes, 0x42);
  std::vector<std::unique_ptr<Looker>> lookers;
  for (size_t i = 0; i < 3; ++i) lookers.push_back(std::make_unique<Looker>(context, swarm->node(i), options_for(16, 20s)));
  auto started = std::chrono::steady_clock::now();
  std::vector<std::future<Result<Group>>> futures;
  for (auto& l : lookers) {
    futures.push_back(std::async(std::launch::async, [&l, &schema] { return l->matchmaker->find_group(schema, 100000, 3); }));
  }
  std::vector<Bytes> ids;
  for (auto& f : futures) {
    auto group = f.get();
    REQUIRE(group.is_ok());
    CHECK(group->size() == 3);
    ids.push_back(group->id());
  }
  CHECK(ids[0] == ids[1]);
  CHECK(ids[1] == ids[2]);
  // Target 16 alone would have kept the leader waiting the whole 20 s for peers that do not exist.
  CHECK(std::chrono::steady_clock::now() - started < 10s);
}

TEST_CASE("Matchmaking: 3 of 4 expected peers form their group a grace after the quorum, not at the deadline",
          "[net][avg]") {
  // The fourth peer died between rounds: its progress record still says the run has 4.
  auto swarm = test::quiet_swarm(3);
  zmq::context_t context;
  const Bytes schema(wire::kSchemaHashBytes, 0x42);
  std::vector<std::unique_ptr<Looker>> lookers;
  for (size_t i = 0; i < 3; ++i) {
    auto options = options_for(16, 20s);
    options.grace = 500ms;
    lookers.push_back(std::make_unique<Looker>(context, swarm->node(i), options));
  }
  auto started = std::chrono::steady_clock::now();
  std::vector<std::future<Result<Group>>> futures;
  for (auto& l : lookers) {
    futures.push_back(std::async(std::launch::async, [&l, &schema] { return l->matchmaker->find_group(schema, 100000, 4); }));
  }
  std::vector<Bytes> ids;
  size_t by_quorum = 0;
  for (size_t i = 0; i < futures.size(); ++i) {
    auto group = futures[i].get();
    REQUIRE(group.is_ok());
    CHECK(group->size() == 3);
    ids.push_back(group->id());
    by_quorum += lookers[i]->matchmaker->last_search().by_quorum;
  }
  CHECK(ids[0] == ids[1]);
  CHECK(ids[1] == ids[2]);
  CHECK(by_quorum == 1);  // the leader
  // Without the grace the leader would have waited the whole 20 s for the fourth.
  CHECK(std::chrono::steady_clock::now() - started < 10s);
}

TEST_CASE("Matchmaking: an aux peer that joins first does not take an expected trainer's place", "[net][avg]") {
  auto swarm = test::quiet_swarm(3);
  zmq::context_t context;
  const Bytes schema(wire::kSchemaHashBytes, 0x42);
  auto aux_options = options_for(16, 20s);
  aux_options.role = AvgRole::kAux;
  Looker first(context, swarm->node(0), options_for(16, 20s));
  Looker aux(context, swarm->node(1), aux_options);
  Looker second(context, swarm->node(2), options_for(16, 20s));
  // Two trainers know of each other (expected 2); the aux peer, which they cannot know of, is in first.
  auto started = std::chrono::steady_clock::now();
  auto a = std::async(std::launch::async, [&] { return first.matchmaker->find_group(schema, 100000, 2); });
  wait_until(first, declared);
  auto x = std::async(std::launch::async, [&] { return aux.matchmaker->find_group(schema, 100000, 0); });
  wait_until(first, leads(2));  // the aux peer is in, and the first trainer still waits for the second
  auto b = std::async(std::launch::async, [&] { return second.matchmaker->find_group(schema, 100000, 2); });
  std::vector<Bytes> ids;
  for (auto* f : {&a, &x, &b}) {
    auto group = f->get();
    REQUIRE(group.is_ok());
    CHECK(group->size() == 3);  // both trainers and the aux peer: not the first trainer and the aux alone
    ids.push_back(group->id());
  }
  CHECK(ids[0] == ids[1]);
  CHECK(ids[1] == ids[2]);
  CHECK(std::chrono::steady_clock::now() - started < 10s);  // formed once the second trainer was in
}

TEST_CASE("Matchmaking: a client-mode peer that starts looking before every node still joins one", "[net][avg]") {
  auto swarm = test::quiet_swarm(2);
  zmq::context_t context;
  const Bytes schema(wire::kSchemaHashBytes, 0x42);
  auto client_options = options_for(16, 3s);
  client_options.role = AvgRole::kClient;
  Looker client(context, swarm->node(0), client_options);
  Looker node(context, swarm->node(1), options_for(16, 3s));
  // The client looks first, so its deadline is the earlier one: no node comes before it in leader order,
  // and it cannot lead (nobody can dial it). It must still go to the node that declares after it.
  auto c = std::async(std::launch::async, [&] { return client.matchmaker->find_group(schema, 100000, 2); });
  wait_until(client, [](const Matchmaker::Snapshot& s) { return s.looking; });
  std::this_thread::sleep_for(1s);
  auto n = std::async(std::launch::async, [&] { return node.matchmaker->find_group(schema, 100000, 2); });
  auto client_group = c.get();
  auto node_group = n.get();
  INFO(client_group.status().to_string() << " / " << node_group.status().to_string());
  REQUIRE(client_group.is_ok());
  REQUIRE(node_group.is_ok());
  CHECK(client_group->size() == 2);
  CHECK(client_group->id() == node_group->id());
}

TEST_CASE("Matchmaking: a peer with another tensor schema is refused, saying why", "[net][avg]") {
  auto swarm = test::quiet_swarm(4);
  zmq::context_t context;
  std::vector<std::unique_ptr<Looker>> lookers;
  for (size_t i = 0; i < 3; ++i) lookers.push_back(std::make_unique<Looker>(context, swarm->node(i), options_for(3, 2s)));
  auto odd_options = options_for(3, 2s);
  odd_options.schema_hash = Bytes(wire::kSchemaHashBytes, 0x99);
  Looker odd(context, swarm->node(3), odd_options);

  auto leader = std::async(std::launch::async, [&] { return lookers[0]->matchmaker->find_group(); });
  wait_until(*lookers[0], declared);
  // Asked directly, the leader names the problem.
  wire::AvgJoin join{"run1_grad", odd_options.schema_hash, odd.server->endpoint(), AvgRole::kNode, 1e8, 0, 1};
  auto reply = odd.client->call(lookers[0]->server->endpoint(), net::Outgoing::of(join), Deadline::after(2s)).wait();
  REQUIRE(reply.is_ok());
  auto refused = reply->decode<wire::AvgJoinRefused>();
  REQUIRE(refused.is_ok());
  CHECK(refused->reason == wire::JoinRefusal::kWrongSchema);
  CHECK_THAT(refused->detail, Catch::Contains("schema differs"));

  // Looking on its own, the odd peer ends alone, and its error says the others average other tensors.
  auto odd_result = std::async(std::launch::async, [&] { return odd.matchmaker->find_group(); });
  auto others = std::async(std::launch::async, [&] {
    std::vector<Result<Group>> out;
    auto a = std::async(std::launch::async, [&] { return lookers[1]->matchmaker->find_group(); });
    auto b = std::async(std::launch::async, [&] { return lookers[2]->matchmaker->find_group(); });
    out.push_back(a.get());
    out.push_back(b.get());
    return out;
  });
  auto odd_group = odd_result.get();
  REQUIRE_FALSE(odd_group.is_ok());
  CHECK(odd_group.status().code() == Code::kTimeout);
  CHECK_THAT(odd_group.status().message(), Catch::Contains("another tensor schema"));
  auto leader_group = leader.get();
  REQUIRE(leader_group.is_ok());
  CHECK(leader_group->size() == 3);
  for (auto& g : others.get()) {
    REQUIRE(g.is_ok());
    CHECK(g->id() == leader_group->id());
  }
}

TEST_CASE("Matchmaking: two partly filled groups that formed side by side merge into one", "[net][avg]") {
  auto swarm = test::quiet_swarm(4);
  zmq::context_t context;
  // C and D start first but look long (late deadlines): D follows C. A and B start later and look briefly,
  // so they come earlier in leader order: B follows A. C, leading a group of two, then finds A earlier
  // and asks to be taken with D. Without merging, A+B and C+D would average separately at A's deadline.
  Looker c(context, swarm->node(0), options_for(4, 8s));
  Looker d(context, swarm->node(1), options_for(4, 8s));
  Looker a(context, swarm->node(2), options_for(4, 4s));
  Looker b(context, swarm->node(3), options_for(4, 4s));
  auto started = std::chrono::steady_clock::now();
  auto groups = find_as_two_pairs(a, b, c, d);
  const crypto::PeerId ids[] = {a.id, b.id, c.id, d.id};
  for (size_t i = 0; i < groups.size(); ++i) {
    INFO("peer " << "ABCD"[i] << ": " << (groups[i].is_ok() ? "ok" : groups[i].status().to_string()));
    REQUIRE(groups[i].is_ok());
    CHECK(groups[i]->size() == 4);
    CHECK(groups[i]->id() == groups[0]->id());
    CHECK(groups[i]->begin().ids == groups[0]->begin().ids);
    for (const auto& id : ids) CHECK(groups[i]->index_of(id));
  }
  // The merged group is full, so it starts before A's deadline rather than waiting for it.
  CHECK(std::chrono::steady_clock::now() - started < 4s);
}

TEST_CASE("Matchmaking: a merge the earlier leader cannot fit leaves both groups as they were", "[net][avg]") {
  auto swarm = test::quiet_swarm(4);
  zmq::context_t context;
  // A and B want pairs; C and D would take a third. C keeps asking A (earlier) to take it with D, and A
  // refuses (full, then no longer looking): C keeps D and the two average as a pair at C's deadline.
  Looker c(context, swarm->node(0), options_for(3, 4s));
  Looker d(context, swarm->node(1), options_for(3, 4s));
  Looker a(context, swarm->node(2), options_for(2, 2s));
  Looker b(context, swarm->node(3), options_for(2, 2s));
  auto groups = find_as_two_pairs(a, b, c, d);
  auto &ga = groups[0], &gb = groups[1], &gc = groups[2], &gd = groups[3];
  REQUIRE(ga.is_ok());
  REQUIRE(gb.is_ok());
  REQUIRE(gc.is_ok());
  REQUIRE(gd.is_ok());
  CHECK(ga->id() == gb->id());
  CHECK(gc->id() == gd->id());
  CHECK(ga->size() == 2);
  CHECK(gc->size() == 2);
  CHECK(gc->index_of(c.id));
  CHECK(gc->index_of(d.id));
}

TEST_CASE("Matchmaking: where a key holds one group, a latecomer learns it formed without us and stops at once",
          "[net][avg]") {
  // A group bucket's key (MatchmakingOptions::one_group_per_key): A and B, all the bucket expects, form its
  // group; C comes after and asks A, which looks no more. C ends its search then, where D, searching the
  // same key without the rule, leads a group of its own to its deadline in case other latecomers come.
  // (Each latecomer's matchmaking time is A's: starting later, it comes after A in leader order and asks it.)
  auto swarm = test::quiet_swarm(4);
  zmq::context_t context;
  auto lookers = lookers_on(*swarm, context, 4, options_for(16, 20s));
  auto fa = find_in_background(*lookers[0], 2);
  auto fb = find_in_background(*lookers[1], 2);
  REQUIRE(fa.get().is_ok());
  REQUIRE(fb.get().is_ok());

  lookers[2]->matchmaker->set_one_group_per_key(true);
  auto started = std::chrono::steady_clock::now();
  auto late = find_in_background(*lookers[2], 2).get();
  const auto late_took = std::chrono::steady_clock::now() - started;
  REQUIRE_FALSE(late.is_ok());
  INFO(late.status().to_string());
  CHECK(late.status().code() == Code::kRefused);
  CHECK(late.status().message().find("formed without us") != std::string::npos);
  CHECK(late_took < 10s);  // not its 20 s

  auto other = find_in_background(*lookers[3], 2);
  CHECK(other.wait_for(4s) == std::future_status::timeout);  // still leading, alone
  lookers[3]->matchmaker->stop();
  REQUIRE(other.wait_for(10s) == std::future_status::ready);
  CHECK(other.get().status().code() == Code::kCancelled);
}

TEST_CASE("Matchmaking: where a key holds one group, its leader's declaration outlives its deadline for latecomers",
          "[net][avg]") {
  // A and B form the key's group at once (all it expects); C comes after A's deadline, when A's declaration
  // would have expired: A keeps it up two more matchmaking windows after forming, so C still finds A, hears
  // that it looks no more and stops at once, instead of leading a group of its own to its deadline.
  auto swarm = test::quiet_swarm(3);
  zmq::context_t context;
  auto lookers = lookers_on(*swarm, context, 3, options_for(16, 2s));
  for (auto& l : lookers) l->matchmaker->set_one_group_per_key(true);
  const auto started = std::chrono::steady_clock::now();
  auto fa = find_in_background(*lookers[0], 2);
  auto fb = find_in_background(*lookers[1], 2);
  REQUIRE(fa.get().is_ok());
  REQUIRE(fb.get().is_ok());
  std::this_thread::sleep_until(started + 2500ms);  // past both deadlines

  check_stops_at_once(*lookers[2], 2, 1800ms);
}

TEST_CASE("Matchmaking: a latecomer that could lead, within a window of the key's group forming, hears it formed",
          "[net][avg]") {
  // A searches ahead (held, as a trainer still computing) expecting 3, and B joins it at once; A's step
  // releases the search 1.5 s later, and a quorum's grace (200 ms) forms the key's group without the third.
  // C (it can lead) comes at 2.3 s, after B's declaration expired (at 2.1 s) and within a window of the
  // group's forming. A's declaration, kept up two windows past the forming (5.7 s), expires after C's own
  // (4.3 s): in leader order A comes after C, so C would never ask it and would lead a group of its own to
  // its deadline. A declares the group formed instead: C asks it first, hears it looks no more and stops at
  // once, and A counts C as a peer its grace left out.
  auto swarm = test::quiet_swarm(3);
  zmq::context_t context;
  auto options = options_for(16, 2s);
  options.grace = 200ms;
  auto lookers = lookers_on(*swarm, context, 3, options);
  for (auto& l : lookers) l->matchmaker->set_one_group_per_key(true);
  const auto started = std::chrono::steady_clock::now();
  lookers[0]->matchmaker->hold();
  auto fa = find_in_background(*lookers[0], 3);
  std::this_thread::sleep_for(100ms);  // A leads: it declared first
  auto fb = find_in_background(*lookers[1], 3);
  std::this_thread::sleep_until(started + 1500ms);
  lookers[0]->matchmaker->release();
  REQUIRE(fa.get().is_ok());
  REQUIRE(fb.get().is_ok());
  CHECK(lookers[0]->matchmaker->last_search().by_quorum);
  std::this_thread::sleep_until(started + 2300ms);

  check_stops_at_once(*lookers[2], 3, 1500ms);
  CHECK(lookers[0]->matchmaker->take_late_joiners() == 1);
}
