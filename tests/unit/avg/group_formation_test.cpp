// The sans-IO group formation (group_formation.hpp): join requests, leaders' answers and time fed by hand,
// time from a ManualClock; no sockets, no threads, no sleeps.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "dedloc/avg/defaults.hpp"
#include "dedloc/avg/group_formation.hpp"
#include "support/random_ids.hpp"

using namespace dedloc;
using namespace dedloc::avg;
using namespace std::chrono_literals;

namespace {

using test::random_id;

const Bytes kSchema(wire::kSchemaHashBytes, 0x42);

Search search_for(size_t target, size_t min = 2, size_t expected = 0, AvgRole role = AvgRole::kNode) {
  Search s;
  s.group_key = "run1_grad";
  s.schema_hash = kSchema;
  s.vector_length = 100000;
  s.part_elements = 1000;
  s.role = role;
  s.bandwidth = 1e8;
  s.endpoint = role == AvgRole::kClient ? "" : "tcp://10.0.0.1:5000";
  s.target_group_size = target;
  s.min_group_size = min;
  s.expected_peers = expected;
  s.matchmaking_time = 5s;
  return s;
}

wire::AvgJoin join_as(AvgRole role = AvgRole::kNode, std::vector<wire::JoinCompanion> companions = {}) {
  wire::AvgJoin j;
  j.group_key = "run1_grad";
  j.schema_hash = kSchema;
  j.endpoint = role == AvgRole::kClient ? "" : "tcp://10.0.0.2:5000";
  j.role = role;
  j.bandwidth = 1e8;
  j.members = 1 + companions.size();
  j.companions = std::move(companions);
  return j;
}

wire::JoinCompanion companion(const crypto::PeerId& id, AvgRole role = AvgRole::kNode) {
  return {id, role == AvgRole::kClient ? "" : "tcp://10.0.0.3:5000", role, 1e8};
}

// One peer's formation, started on a ManualClock; `seed` draws its id and its joiners' (peers meant to
// be different must have different seeds).
struct Peer {
  std::mt19937_64 rng;
  ManualClock clock;
  crypto::PeerId self;
  GroupFormation formation;

  explicit Peer(const Search& search, std::uint64_t seed = 7) : rng(seed), self(random_id(rng)), formation(self) {
    start(search);
  }
  void start(const Search& search) {
    REQUIRE(check_search(search).is_ok());
    formation.start(search, clock.now(), clock.unix_seconds());
  }
  crypto::PeerId other() { return random_id(rng); }
  // A joiner that is taken; returns its id.
  crypto::PeerId take(AvgRole role = AvgRole::kNode, std::vector<wire::JoinCompanion> companions = {}) {
    crypto::PeerId who = other();
    auto refused = formation.on_join(who, join_as(role, std::move(companions)), clock.now());
    INFO((refused ? refused->detail : ""));
    REQUIRE_FALSE(refused);
    return who;
  }
  NextStep next() const { return formation.next(clock.now()); }
  Assembly assemble() { return formation.assemble(Bytes(wire::kGroupIdBytes, 0x17), 99); }
};

wire::JoinRefusal refusal_of(const std::optional<wire::AvgJoinRefused>& refused) {
  REQUIRE(refused);
  return refused->reason;
}

}  // namespace

TEST_CASE("Group formation: a search that can lead leads, a client only joins", "[unit][avg][matchmaking]") {
  Peer leader(search_for(4));
  CHECK(leader.formation.looking());
  CHECK(leader.formation.leading());
  CHECK(leader.formation.group_size() == 1);
  CHECK(leader.next() == NextStep::kLook);
  CHECK(leader.formation.expiration() == Approx(leader.clock.unix_seconds() + 5.0));
  CHECK(leader.formation.deadline() == leader.clock.now() + 5s);

  Peer client(search_for(4, 2, 0, AvgRole::kClient));
  CHECK(client.formation.looking());
  CHECK_FALSE(client.formation.leading());
  auto refused = client.formation.on_join(client.other(), join_as());
  CHECK(refusal_of(refused) == wire::JoinRefusal::kNotALeader);
}

TEST_CASE("Group formation: a search that cannot be looked for says why", "[unit][avg][matchmaking]") {
  auto s = search_for(4);
  s.schema_hash.resize(3);
  CHECK(check_search(s).code() == Code::kInvalidArgument);
  s = search_for(1, 1);
  CHECK(check_search(s).code() == Code::kInvalidArgument);
  s = search_for(4, 5);
  CHECK(check_search(s).code() == Code::kInvalidArgument);
  s = search_for(4);
  s.endpoint.clear();  // a node without an endpoint: its server is not started
  CHECK_THAT(check_search(s).message(), Catch::Contains("not started"));
  s.role = AvgRole::kClient;
  CHECK(check_search(s).is_ok());
}

TEST_CASE("Group formation: a leader takes joiners, counting the companions they bring, and a retry replaces",
          "[unit][avg][matchmaking]") {
  Peer p(search_for(8));
  auto first = p.take();
  CHECK(p.formation.holds(first));
  CHECK(p.formation.group_size() == 2);
  p.take(AvgRole::kNode, {companion(p.other()), companion(p.other(), AvgRole::kClient)});
  CHECK(p.formation.group_size() == 5);
  // The same peer asking again (its request timed out on its side, say) is one member, not two.
  CHECK_FALSE(p.formation.on_join(first, join_as()));
  CHECK(p.formation.group_size() == 5);
  CHECK(p.next() == NextStep::kLook);
}

TEST_CASE("Group formation: a leader refuses joiners, each refusal saying why", "[unit][avg][matchmaking]") {
  Peer p(search_for(3));
  const auto who = p.other();

  SECTION("not looking: before a search, under another key, after the group formed") {
    GroupFormation idle(p.self);
    auto refused = idle.on_join(who, join_as());
    CHECK(refusal_of(refused) == wire::JoinRefusal::kNotLooking);
    auto other_key = join_as();
    other_key.group_key = "run2_grad";
    refused = p.formation.on_join(who, other_key);
    CHECK(refusal_of(refused) == wire::JoinRefusal::kNotLooking);
    CHECK_THAT(refused->detail, Catch::Contains("run2_grad"));
    p.take();
    p.take();
    REQUIRE(p.assemble().group.is_ok());
    CHECK(refusal_of(p.formation.on_join(who, join_as())) == wire::JoinRefusal::kNotLooking);
  }
  SECTION("another tensor schema") {
    auto odd = join_as();
    odd.schema_hash = Bytes(wire::kSchemaHashBytes, 0x99);
    auto refused = p.formation.on_join(who, odd);
    CHECK(refusal_of(refused) == wire::JoinRefusal::kWrongSchema);
    CHECK_THAT(refused->detail, Catch::Contains("schema differs: 42424242… here, 99999999… from you"));
  }
  SECTION("following another leader: the refusal names it") {
    REQUIRE(p.formation.ask("tcp://10.0.0.9:5000/p/leader"));
    auto refused = p.formation.on_join(who, join_as());
    CHECK(refusal_of(refused) == wire::JoinRefusal::kNotALeader);
    CHECK(refused->leader == "tcp://10.0.0.9:5000/p/leader");
  }
  SECTION("bad requests") {
    CHECK(p.formation.on_join(p.self, join_as())->detail == "that is us");
    auto no_endpoint = join_as();
    no_endpoint.endpoint.clear();
    CHECK(p.formation.on_join(who, no_endpoint)->detail == "a member that reduces needs an endpoint");
    CHECK(p.formation.on_join(who, join_as(AvgRole::kNode, {companion(p.self)}))->detail ==
          "a companion is us or the joiner");
    CHECK(p.formation.on_join(who, join_as(AvgRole::kNode, {companion(who)}))->detail ==
          "a companion is us or the joiner");
    auto mute = companion(p.other());
    mute.endpoint.clear();
    CHECK(p.formation.on_join(who, join_as(AvgRole::kNode, {mute}))->detail ==
          "a companion that reduces needs an endpoint");
    const auto follower = p.take();
    CHECK(p.formation.on_join(who, join_as(AvgRole::kNode, {companion(follower)}))->detail ==
          "a companion is already in this group");
    for (const auto& bad : {join_as(AvgRole::kNode, {companion(follower)}), no_endpoint}) {
      CHECK(refusal_of(p.formation.on_join(who, bad)) == wire::JoinRefusal::kBadRequest);
    }
    CHECK(p.formation.group_size() == 2);  // none of them got in
  }
  SECTION("full: a join whose members do not fit") {
    p.take();
    auto refused = p.formation.on_join(who, join_as(AvgRole::kNode, {companion(p.other())}));
    CHECK(refusal_of(refused) == wire::JoinRefusal::kGroupFull);
    CHECK(refused->detail == "group full (3)");
    CHECK_FALSE(p.formation.on_join(who, join_as()));  // one more fits
  }
  SECTION("a refused retry drops the earlier request") {
    p.take();
    CHECK_FALSE(p.formation.on_join(who, join_as()));
    CHECK(p.formation.holds(who));
    CHECK(p.formation.on_join(who, join_as(AvgRole::kNode, {companion(p.other()), companion(p.other())})));
    CHECK_FALSE(p.formation.holds(who));
    CHECK(p.formation.group_size() == 2);
  }
}

TEST_CASE("Group formation: a group forms as soon as it is full, with everyone's shares planned once",
          "[unit][avg][matchmaking]") {
  Peer p(search_for(4));
  std::vector<crypto::PeerId> direct{p.take()};
  const auto brought = p.other();
  direct.push_back(p.take(AvgRole::kClient, {companion(brought, AvgRole::kAux)}));
  CHECK(p.formation.full());
  CHECK(p.next() == NextStep::kAssemble);  // long before the deadline

  auto assembly = p.assemble();
  REQUIRE(assembly.group.is_ok());
  CHECK_FALSE(assembly.refusal);
  const Group& g = *assembly.group;
  CHECK(g.size() == 4);
  CHECK(g.id() == Bytes(wire::kGroupIdBytes, 0x17));
  CHECK(g.length() == 100000);
  CHECK(g.begin().part_elements == 1000);
  for (const auto& id : direct) CHECK(g.index_of(id));
  CHECK(g.index_of(brought));
  CHECK(g.index_of(p.self));
  std::uint64_t total = 0;
  for (auto c : g.begin().counts) total += c;
  CHECK(total == 100000);
  // Only our own followers hear from us: the companion hears from the leader that brought it.
  std::sort(direct.begin(), direct.end());
  std::sort(assembly.followers.begin(), assembly.followers.end());
  CHECK(assembly.followers == direct);
  CHECK_FALSE(p.formation.looking());
  CHECK(p.formation.group_size() == 1);
}

TEST_CASE("Group formation: a client's relay address, from its join or its leader's companions, is in the BEGIN",
          "[unit][avg][matchmaking]") {
  // Members ping a client there during the round (avg/all_reduce.hpp); a merging leader passes it on.
  Peer p(search_for(5));
  const std::string relay_of_joiner = "relay://10.0.0.8:7100/p/joiner", relay_of_brought = "relay://10.0.0.8:7100/p/brought";
  const auto joiner = p.other(), brought = p.other(), node = p.take();
  auto client_join = join_as(AvgRole::kClient, {wire::JoinCompanion{brought, "", AvgRole::kClient, 1e8, relay_of_brought}});
  client_join.relay = relay_of_joiner;
  REQUIRE_FALSE(p.formation.on_join(joiner, client_join, p.clock.now()));

  auto companions = p.formation.ask("tcp://10.0.0.9:5000/p/earlier");
  REQUIRE(companions);
  REQUIRE(companions->size() == 3);
  CHECK((*companions)[0].relay.empty());
  CHECK((*companions)[1] == wire::JoinCompanion{joiner, "", AvgRole::kClient, 1e8, relay_of_joiner});
  CHECK((*companions)[2].relay == relay_of_brought);
  p.formation.on_refused();

  auto assembly = p.assemble();
  REQUIRE(assembly.group.is_ok());
  const Group& g = *assembly.group;
  REQUIRE(g.begin().relays.size() == 4);
  CHECK(g.member(*g.index_of(joiner)).relay == relay_of_joiner);
  CHECK(g.member(*g.index_of(joiner)).ping_endpoint() == relay_of_joiner);
  CHECK(g.member(*g.index_of(brought)).ping_endpoint() == relay_of_brought);
  CHECK(g.member(*g.index_of(node)).relay.empty());
  CHECK(g.member(*g.index_of(node)).ping_endpoint() == "tcp://10.0.0.2:5000");  // dialled directly
  CHECK(g.member(*g.index_of(p.self)).ping_endpoint() == "tcp://10.0.0.1:5000");
  // A round derived from the group (the trainer's cross-bucket hand-on) pings them there too.
  auto derived = g.derived("across");
  REQUIRE(derived.is_ok());
  CHECK(derived->member(*derived->index_of(joiner)).ping_endpoint() == relay_of_joiner);
}

TEST_CASE("Group formation: a leader with equal_shares splits equally whatever the bandwidths, else it plans",
          "[unit][avg][matchmaking]") {
  auto counts = [](bool equal) {
    auto search = search_for(4);
    search.bandwidth = 125e6;  // the leader at 1 Gbit/s, its followers at 200, 100 and 50 Mbit/s
    search.equal_shares = equal;
    Peer p(search);
    std::vector<std::pair<crypto::PeerId, double>> members{{p.self, 125e6}};
    for (double rate : {25e6, 12.5e6, 6.25e6}) {
      auto join = join_as();
      join.bandwidth = rate;
      const auto who = p.other();
      REQUIRE_FALSE(p.formation.on_join(who, join));
      members.push_back({who, rate});
    }
    auto assembly = p.assemble();
    REQUIRE(assembly.group.is_ok());
    std::vector<std::uint64_t> by_bandwidth;  // fastest first
    for (const auto& [id, rate] : members) by_bandwidth.push_back(assembly.group->begin().counts[*assembly.group->index_of(id)]);
    return by_bandwidth;
  };
  CHECK(counts(true) == std::vector<std::uint64_t>{25000, 25000, 25000, 25000});
  const auto planned = counts(false);
  CHECK(planned[0] > planned[1]);
  CHECK(planned[3] < 25000);
}

TEST_CASE("Group formation: the members' order is the shuffle's, the same for the same seed",
          "[unit][avg][matchmaking]") {
  auto order = [](std::uint64_t seed) {
    Peer p(search_for(6));
    for (int i = 0; i < 5; ++i) p.take();
    auto assembly = p.formation.assemble(Bytes(wire::kGroupIdBytes, 1), seed);
    REQUIRE(assembly.group.is_ok());
    return assembly.group->begin().ids;
  };
  CHECK(order(5) == order(5));
  bool any_differs = false;
  for (std::uint64_t seed = 1; seed < 20 && !any_differs; ++seed) any_differs = order(seed) != order(5);
  CHECK(any_differs);
}

TEST_CASE("Group formation: at the deadline a group forms if it has min_group_size members, else the search gives up",
          "[unit][avg][matchmaking]") {
  SECTION("large enough: it forms at the deadline, not before") {
    Peer p(search_for(4, 2));
    p.take();
    CHECK(p.next() == NextStep::kLook);
    p.clock.advance(4999ms);
    CHECK(p.next() == NextStep::kLook);
    p.clock.advance(1ms);
    CHECK(p.next() == NextStep::kAssemble);
    auto assembly = p.assemble();
    REQUIRE(assembly.group.is_ok());
    CHECK(assembly.group->size() == 2);
  }
  SECTION("too small: the followers hear it is too late") {
    Peer p(search_for(4, 3));
    const auto follower = p.take();
    p.clock.advance(5s);
    CHECK(p.next() == NextStep::kGiveUp);
    auto dismissal = p.formation.time_out();
    CHECK(dismissal.followers == std::vector<crypto::PeerId>{follower});
    CHECK(dismissal.answer.reason == wire::JoinRefusal::kTooLate);
    CHECK_FALSE(p.formation.looking());
  }
  SECTION("giving up early (the key's one group formed without us): the followers hear we look no more, and why") {
    Peer p(search_for(4, 3));
    const auto follower = p.take();
    auto dismissal = p.formation.give_up("the group under 'k' formed without us");
    CHECK(dismissal.followers == std::vector<crypto::PeerId>{follower});
    CHECK(dismissal.answer.reason == wire::JoinRefusal::kNotLooking);
    CHECK(dismissal.answer.detail == "the group under 'k' formed without us");
    CHECK_FALSE(p.formation.looking());
  }
  SECTION("alone: nobody to form a group with, whatever min_group_size") {
    Peer p(search_for(4, 1));
    p.clock.advance(6s);
    CHECK(p.next() == NextStep::kGiveUp);
    CHECK(p.formation.time_out().followers.empty());
  }
  SECTION("a client never forms one") {
    Peer p(search_for(4, 1, 0, AvgRole::kClient));
    p.clock.advance(5s);
    CHECK(p.next() == NextStep::kGiveUp);
  }
  SECTION("aux peers alone never form one: nobody sends a vector") {
    Peer p(search_for(4, 2, 0, AvgRole::kAux));
    const auto follower = p.take(AvgRole::kAux);
    p.clock.advance(5s);
    CHECK(p.next() == NextStep::kGiveUp);
    CHECK(p.formation.time_out().followers == std::vector<crypto::PeerId>{follower});
    // With one member that sends, the same group forms.
    Peer q(search_for(4, 2, 0, AvgRole::kAux), 8);
    q.take(AvgRole::kAux);
    q.take();
    q.clock.advance(5s);
    CHECK(q.next() == NextStep::kAssemble);
  }
}

TEST_CASE("Group formation: a peer shutting down refuses its followers: it is not looking any more",
          "[unit][avg][matchmaking]") {
  Peer p(search_for(4));
  const auto follower = p.take();
  auto dismissal = p.formation.shut_down();
  CHECK(dismissal.followers == std::vector<crypto::PeerId>{follower});
  CHECK(dismissal.answer.reason == wire::JoinRefusal::kNotLooking);
  CHECK_FALSE(p.formation.looking());
  CHECK(refusal_of(p.formation.on_join(p.other(), join_as())) == wire::JoinRefusal::kNotLooking);
}

TEST_CASE("Group formation: a group that cannot average is refused to its followers, saying why",
          "[unit][avg][matchmaking]") {
  Peer p(search_for(2, 2, 0, AvgRole::kAux));
  p.take(AvgRole::kAux);  // nobody sends a vector
  REQUIRE(p.next() == NextStep::kAssemble);
  auto assembly = p.assemble();
  REQUIRE_FALSE(assembly.group.is_ok());
  CHECK_THAT(assembly.group.status().message(), Catch::Contains("assembling the group"));
  REQUIRE(assembly.refusal);
  CHECK(assembly.refusal->reason == wire::JoinRefusal::kBadRequest);
  CHECK_THAT(assembly.refusal->detail, Catch::Contains("the group cannot average"));
  CHECK(assembly.followers.size() == 1);
}

TEST_CASE("Group formation: expected peers complete a group at once, and only members that send count toward them",
          "[unit][avg][matchmaking]") {
  SECTION("three expected trainers: the third completes the group, target 16 notwithstanding") {
    Peer p(search_for(16, 2, 3));
    p.take();
    CHECK(p.next() == NextStep::kLook);
    p.take();
    CHECK(p.next() == NextStep::kAssemble);
  }
  SECTION("an aux peer in early does not take the second trainer's place") {
    Peer p(search_for(16, 2, 2));
    p.take(AvgRole::kAux);
    CHECK(p.formation.group_size() == 2);
    CHECK(p.formation.senders() == 1);
    CHECK_FALSE(p.formation.full());
    p.take(AvgRole::kClient);  // clients send: a trainer behind NAT
    CHECK(p.formation.full());
    auto assembly = p.assemble();
    REQUIRE(assembly.group.is_ok());
    CHECK(assembly.group->size() == 3);  // the aux peer is in too
  }
  SECTION("companions count as what they are") {
    Peer p(search_for(16, 2, 3));
    p.take(AvgRole::kAux, {companion(p.other(), AvgRole::kAux)});
    CHECK(p.formation.senders() == 1);
    p.take(AvgRole::kAux, {companion(p.other())});
    CHECK(p.formation.senders() == 2);
    CHECK_FALSE(p.formation.full());
    p.take(AvgRole::kAux, {companion(p.other(), AvgRole::kClient)});
    CHECK(p.formation.full());
  }
  SECTION("an aux leader does not count itself") {
    Peer p(search_for(16, 2, 2, AvgRole::kAux));
    CHECK(p.formation.senders() == 0);
    p.take();
    CHECK_FALSE(p.formation.full());
    p.take();
    CHECK(p.formation.full());
  }
  SECTION("the hint is kept within [max(2, min_group_size), target_group_size]") {
    Peer alone(search_for(16, 1, 1));  // "only us" still needs someone to average with
    CHECK_FALSE(alone.formation.full());
    alone.take();
    CHECK(alone.formation.full());
    Peer small(search_for(16, 3, 2));  // fewer expected than min_group_size: wait for min_group_size
    small.take();
    CHECK_FALSE(small.formation.full());
    small.take();
    CHECK(small.formation.full());
    Peer big(search_for(3, 2, 10));  // more expected than fit: a full group
    big.take();
    CHECK_FALSE(big.formation.full());
    big.take();
    CHECK(big.formation.full());
  }
}

TEST_CASE("Group formation: a held search keeps its group open for aux peers until release",
          "[unit][avg][matchmaking]") {
  Peer p(search_for(4, 2, 2));
  p.formation.hold();
  p.start(search_for(4, 2, 2));  // hold() comes before the search starts, and outlives its start
  p.take();
  CHECK_FALSE(p.formation.full());  // every expected trainer is in, but our own step has not come
  CHECK(p.next() == NextStep::kLook);
  p.take(AvgRole::kAux);
  CHECK(p.next() == NextStep::kLook);
  p.formation.release();
  CHECK(p.next() == NextStep::kAssemble);
  auto assembly = p.assemble();
  REQUIRE(assembly.group.is_ok());
  CHECK(assembly.group->size() == 3);

  SECTION("target_group_size still completes a held group") {
    Peer q(search_for(3, 2, 2));
    q.formation.hold();
    q.take();
    q.take(AvgRole::kAux);
    CHECK(q.next() == NextStep::kAssemble);
  }
  SECTION("and the deadline forms it") {
    Peer q(search_for(4, 2, 2));
    q.formation.hold();
    q.take();
    q.clock.advance(5s);
    CHECK(q.next() == NextStep::kAssemble);
  }
}

TEST_CASE("Group formation: the count expected at release replaces the one a held search began with",
          "[unit][avg][matchmaking]") {
  Search search = search_for(16, 2, /*expected=*/5);
  search.grace = 500ms;
  Peer p(search);
  p.formation.hold();  // searching ahead: 5 expected when our last step drew the split
  p.start(search);
  p.take();
  p.take();  // 3 of 5 in: no quorum (4)
  CHECK_FALSE(p.formation.grace_end().has_value());
  p.clock.advance(1s);
  SECTION("two of them never reached the round: the three in complete the group at our step") {
    p.formation.expect(3, p.clock.now());
    p.formation.release(p.clock.now());
    CHECK(p.formation.full());
    CHECK(p.next() == NextStep::kAssemble);
    auto assembly = p.assemble();
    REQUIRE(assembly.group.is_ok());
    CHECK(assembly.group->size() == 3);
  }
  SECTION("one of them did not: the quorum of 4 is in, and its grace runs from now") {
    p.formation.expect(4, p.clock.now());
    p.formation.release(p.clock.now());
    CHECK_FALSE(p.formation.full());
    REQUIRE(p.formation.grace_end().has_value());
    CHECK(*p.formation.grace_end() == p.clock.now() + 500ms);
    CHECK(p.next() == NextStep::kLook);
    p.take();
    CHECK(p.next() == NextStep::kAssemble);  // the fourth completes it
  }
  SECTION("a count raised again takes back a quorum it no longer makes") {
    p.formation.expect(3, p.clock.now());
    CHECK_FALSE(p.formation.grace_end().has_value());  // held: no grace before the release
    p.formation.expect(8, p.clock.now());
    p.formation.release(p.clock.now());
    CHECK_FALSE(p.formation.full());
    CHECK_FALSE(p.formation.grace_end().has_value());
    CHECK(p.next() == NextStep::kLook);
  }
}

TEST_CASE("Group formation: an aux peer never takes the place of a trainer still expected", "[unit][avg][matchmaking]") {
  // The lab's 16 volunteers: a bucket of 7 trainers in groups of 8, and an aux peer that came before the
  // last trainer took the eighth place; the trainer, a second later, found the group full and missed its round.
  Peer p(search_for(8, 2, 7));
  p.formation.hold();
  for (int i = 0; i < 5; ++i) p.take(AvgRole::kClient);  // 6 of the 7 trainers in, us included
  SECTION("a lone aux peer is refused while the last trainer is missing, saying so") {
    const auto first = p.take(AvgRole::kAux);  // 7 members: one place left beyond the missing trainer
    CHECK(p.formation.holds(first));
    auto refused = p.formation.on_join(p.other(), join_as(AvgRole::kAux), p.clock.now());
    CHECK(refusal_of(refused) == wire::JoinRefusal::kGroupFull);
    CHECK_THAT(refused->detail, Catch::Contains("kept for the 1 trainer(s) still expected"));
    p.take(AvgRole::kClient);  // the seventh trainer still finds its place
    CHECK(p.formation.group_size() == 8);
    CHECK(p.next() == NextStep::kAssemble);
  }
  SECTION("a merge of aux peers only is refused too; one that brings the trainer is not") {
    // 6 members: two aux peers fit in the 8 only by taking the missing trainer's place.
    CHECK(refusal_of(p.formation.on_join(p.other(), join_as(AvgRole::kAux, {companion(p.other(), AvgRole::kAux)}),
                                         p.clock.now())) == wire::JoinRefusal::kGroupFull);
    p.take(AvgRole::kAux, {companion(p.other(), AvgRole::kClient)});
    CHECK(p.formation.group_size() == 8);
    CHECK(p.formation.full());
  }
  SECTION("once every expected trainer is in, aux peers fill the rest") {
    p.take(AvgRole::kClient);
    p.take(AvgRole::kAux);
    CHECK(p.formation.group_size() == 8);
  }
}

TEST_CASE("Group formation: a leader merging into an earlier one brings its followers and passes the BEGIN on",
          "[unit][avg][matchmaking]") {
  Peer late(search_for(5));
  const auto f1 = late.take();
  const auto brought = late.other();
  const auto f2 = late.take(AvgRole::kClient, {companion(brought)});

  auto companions = late.formation.ask("tcp://10.0.0.9:5000/p/earlier");
  REQUIRE(companions);
  REQUIRE(companions->size() == 3);  // f1, f2 and the one f2 brought, with their roles and bandwidths
  CHECK((*companions)[0] == wire::JoinCompanion{f1, "tcp://10.0.0.2:5000", AvgRole::kNode, 1e8});
  CHECK((*companions)[1] == wire::JoinCompanion{f2, "", AvgRole::kClient, 1e8});
  CHECK((*companions)[2] == companion(brought));
  CHECK_FALSE(late.formation.leading());
  CHECK(late.formation.following() == "tcp://10.0.0.9:5000/p/earlier");
  // Waiting for the answer is bounded by our deadline plus a little: our followers (who did not say how
  // long they wait) wait only until theirs.
  const auto now = late.clock.now();
  const double unix_now = late.clock.unix_seconds();
  CHECK(late.formation.answer_deadline(true, now, unix_now) == late.formation.deadline() + 500ms);
  CHECK(late.formation.answer_deadline(false, now, unix_now) == late.formation.deadline() + 2s);

  SECTION("taken: our followers get the earlier leader's BEGIN (not the companions: theirs hear from them)") {
    auto followers = late.formation.on_taken();
    CHECK(followers == std::vector<crypto::PeerId>{f1, f2});
    CHECK_FALSE(late.formation.looking());
  }
  SECTION("refused: nothing changed, we lead our group again") {
    late.formation.on_refused();
    CHECK(late.formation.leading());
    CHECK(late.formation.following().empty());
    CHECK(late.formation.group_size() == 4);
    CHECK(late.formation.holds(f1));
    CHECK_FALSE(late.formation.on_join(late.other(), join_as()));  // taking joiners again
  }

  SECTION("the earlier leader takes the whole group as one join") {
    Peer earlier(search_for(6), 8);
    earlier.take();
    auto merge = join_as(AvgRole::kNode, *companions);
    REQUIRE_FALSE(earlier.formation.on_join(late.self, merge));
    CHECK(earlier.formation.group_size() == 6);
    CHECK(earlier.formation.senders() == 6);
    auto assembly = earlier.assemble();
    REQUIRE(assembly.group.is_ok());
    CHECK(assembly.group->size() == 6);
    for (const auto& id : {late.self, f1, f2, brought}) CHECK(assembly.group->index_of(id));
    CHECK(assembly.followers.size() == 2);  // its own follower and the merging leader
  }
  SECTION("an earlier leader without room refuses the merge whole") {
    Peer earlier(search_for(5), 8);
    earlier.take();
    auto merge = join_as(AvgRole::kNode, *companions);
    CHECK(refusal_of(earlier.formation.on_join(late.self, merge)) == wire::JoinRefusal::kGroupFull);
    CHECK(earlier.formation.group_size() == 2);
  }
}

TEST_CASE("Group formation: a leader whose followers filled its group does not ask anyone: it leads",
          "[unit][avg][matchmaking]") {
  Peer p(search_for(2));
  p.take();
  CHECK_FALSE(p.formation.ask("tcp://10.0.0.9:5000/p/earlier"));
  CHECK(p.formation.leading());
  CHECK(p.next() == NextStep::kAssemble);
}

TEST_CASE("Group formation: earlier peers come in leader order: earlier expiration first, ties to the smaller id",
          "[unit][avg][matchmaking]") {
  std::mt19937_64 rng(11);
  std::vector<crypto::PeerId> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(random_id(rng));
  std::sort(ids.begin(), ids.end());
  const crypto::PeerId self = ids[2];
  auto entry = [](const crypto::PeerId& id, double expiration, const Bytes& schema = kSchema) {
    const std::string address = net::PeerAddress{"tcp://10.0.0.1:5000", id}.to_string();
    return dht::FoundEntry{Bytes(address.begin(), address.end()), schema, expiration};
  };
  const std::string garbage = "not an address";
  std::vector<dht::FoundEntry> entries{
      entry(ids[4], 100),                                 // earlier
      entry(ids[0], 200),                                 // a tie with us, smaller id: earlier
      entry(ids[3], 200),                                 // a tie with us, larger id: later
      entry(ids[1], 300),                                 // later
      entry(self, 200),                                   // us
      entry(ids[1], 50, Bytes(wire::kSchemaHashBytes, 1)),  // another schema, however early
      dht::FoundEntry{Bytes(garbage.begin(), garbage.end()), kSchema, 10},
      dht::FoundEntry{std::nullopt, kSchema, 10},          // not a dictionary entry
  };
  auto found = earlier_peers(entries, self, kSchema, 200);
  REQUIRE(found.leaders.size() == 2);
  CHECK(found.leaders[0].peer_id == ids[4]);
  CHECK(found.leaders[1].peer_id == ids[0]);
  CHECK(found.leaders[0].endpoint == "tcp://10.0.0.1:5000");
  CHECK(found.looking == 5);
  CHECK(found.other_schema == 1);
  // Seen from the earliest, nobody comes first: merges cannot cycle.
  CHECK(earlier_peers(entries, ids[4], kSchema, 100).leaders.empty());
  CHECK_FALSE(found.formed);
}

TEST_CASE("Group formation: a formed group's declaration is no leader to ask, however late it expires",
          "[unit][avg][matchmaking]") {
  std::mt19937_64 rng(12);
  const crypto::PeerId self = random_id(rng), formed_leader = random_id(rng), looking = random_id(rng);
  auto entry = [](const crypto::PeerId& id, double expiration, const Bytes& value) {
    const std::string address = net::PeerAddress{"tcp://10.0.0.1:5000", id}.to_string();
    return dht::FoundEntry{Bytes(address.begin(), address.end()), value, expiration};
  };
  // Kept up two windows past its forming, it expires after us: as a plain declaration it came later.
  const std::vector<dht::FoundEntry> entries{entry(formed_leader, 400, formed_declaration(kSchema)),
                                             entry(looking, 100, kSchema)};
  auto found = earlier_peers(entries, self, kSchema, 200);
  REQUIRE(found.formed);
  CHECK(found.formed->peer_id == formed_leader);
  REQUIRE(found.leaders.size() == 1);  // only the one still looking
  CHECK(found.leaders[0].peer_id == looking);
  CHECK(found.looking == 1);
  // A formed group of another schema says nothing of ours.
  const Bytes other(wire::kSchemaHashBytes, 1);
  auto theirs = earlier_peers({entry(formed_leader, 400, formed_declaration(other))}, self, kSchema, 200);
  CHECK_FALSE(theirs.formed);
  CHECK(theirs.other_schema == 1);
  // Nor is our own (a search of ours that formed under the key before) a group formed without us.
  CHECK_FALSE(earlier_peers({entry(self, 400, formed_declaration(kSchema))}, self, kSchema, 200).formed);
}

// Quorum and grace (Search::grace): a leader that expects more peers than come forms its group once a
// quorum is in and the grace has passed, instead of waiting out matchmaking_time for a peer that died.

TEST_CASE("Group formation: the quorum is all but a quarter of the expected senders, at least two", "[unit][avg]") {
  CHECK(quorum_of(0) == 0);
  CHECK(quorum_of(2) == 2);  // a pair waits for both
  CHECK(quorum_of(3) == 2);
  CHECK(quorum_of(4) == 3);
  CHECK(quorum_of(8) == 6);
  CHECK(quorum_of(16) == 12);
}

TEST_CASE("Group formation: a quorum forms the group when its grace ends, not at the deadline", "[unit][avg]") {
  Search search = search_for(16, 2, /*expected=*/4);
  search.grace = 700ms;
  Peer p(search);
  p.clock.advance(100ms);
  p.take();
  p.clock.advance(100ms);
  CHECK_FALSE(p.formation.grace_end().has_value());  // 2 of 4: no quorum yet
  p.take();                                          // 3 of 4: the quorum, at 200 ms
  REQUIRE(p.formation.grace_end().has_value());
  CHECK(*p.formation.grace_end() == p.clock.now() + 700ms);
  p.clock.advance(699ms);
  CHECK(p.next() == NextStep::kLook);  // the fourth may still come
  p.clock.advance(1ms);
  CHECK(p.next() == NextStep::kAssemble);  // 0.9 s, where the deadline is 5 s
  auto assembly = p.assemble();
  REQUIRE(assembly.group.is_ok());
  CHECK(assembly.group->size() == 3);
  CHECK(assembly.by_quorum);
  CHECK_FALSE(assembly.quorum_to_full.has_value());  // nothing learned about how long the rest take
}

TEST_CASE("Group formation: the last expected peer within the grace completes the group, and says how long it took",
          "[unit][avg]") {
  Search search = search_for(16, 2, 4);
  search.grace = 700ms;
  Peer p(search);
  p.take();
  p.take();  // the quorum, at 0
  p.clock.advance(300ms);
  CHECK(p.next() == NextStep::kLook);
  p.take();  // all four
  CHECK(p.next() == NextStep::kAssemble);
  auto assembly = p.assemble();
  REQUIRE(assembly.group.is_ok());
  CHECK(assembly.group->size() == 4);
  CHECK_FALSE(assembly.by_quorum);
  REQUIRE(assembly.quorum_to_full.has_value());
  CHECK(*assembly.quorum_to_full == 300ms);
}

TEST_CASE("Group formation: without a grace the quorum changes nothing, and a held search waits for its release",
          "[unit][avg]") {
  {
    Peer p(search_for(16, 2, 4));  // grace zero: the old rule
    p.take();
    p.take();
    p.clock.advance(4999ms);
    CHECK(p.next() == NextStep::kLook);
    CHECK_FALSE(p.formation.grace_end().has_value());
  }
  Search search = search_for(16, 2, 4);
  search.grace = 500ms;
  Peer p(search);
  p.formation.hold();  // searching ahead while we still compute
  p.take();
  p.take();
  p.clock.advance(2s);
  CHECK(p.next() == NextStep::kLook);  // held: never formed by the quorum
  p.formation.release(p.clock.now());
  CHECK(p.next() == NextStep::kLook);  // the grace counts from the release
  p.clock.advance(500ms);
  CHECK(p.next() == NextStep::kAssemble);
}

TEST_CASE("Group formation: a quorum smaller than min_group_size never forms early", "[unit][avg]") {
  Search search = search_for(16, /*min=*/4, /*expected=*/4);
  search.grace = 500ms;
  Peer p(search);
  p.take();
  p.take();  // 3 of 4 is a quorum, but the recipe wants 4
  p.clock.advance(1s);
  CHECK(p.next() == NextStep::kLook);
}

TEST_CASE("The part grid: the configured one for large shares, finer for small ones, never below the floor",
          "[unit][avg][matchmaking]") {
  const std::uint64_t configured = default_part_elements();  // 128 Ki values
  // 16 Mi values over 4 peers: shares of 4 Mi, 32 configured parts each.
  CHECK(grid_part_elements({4u << 20, 4u << 20, 4u << 20, 4u << 20}, configured) == configured);
  // The lab's scaled ALBERT with the planner's shares: the smallest share handed out (112,500 values, one
  // configured part) is cut into 8; the slow peers' zero shares are not shares.
  const std::vector<std::uint64_t> planned = {337500, 337500, 337500, 337500, 112500, 112500, 112500, 112500,
                                              112500, 112500, 112500, 112500, 0,      0,      0,      0};
  const auto fine = grid_part_elements(planned, configured);
  CHECK(fine == (112500 + kMinPartsPerShare - 1) / kMinPartsPerShare);
  CHECK((112500 + fine - 1) / fine == kMinPartsPerShare);
  // Tiny shares stop at the floor; a configured grid finer than the floor is kept.
  CHECK(grid_part_elements({1000, 1000}, configured) == kMinGridPartElements);
  CHECK(grid_part_elements({1000, 1000}, 500) == 500);
  // Nothing to reduce anywhere (a grid is still announced).
  CHECK(grid_part_elements({0, 0}, configured) == configured);
  // Cut so, each share is kMinPartsPerShare parts.
  std::mt19937_64 rng(7);
  Group group = Group::from_begin(wire::AvgBegin{.group_id = Bytes(wire::kGroupIdBytes, 1),
                                                 .ids = {random_id(rng), random_id(rng)},
                                                 .endpoints = {"tcp://a:1", "tcp://b:1"},
                                                 .roles = {AvgRole::kNode, AvgRole::kNode},
                                                 .counts = {100000, 100000},
                                                 .length = 200000,
                                                 .part_elements = grid_part_elements({100000, 100000}, configured)})
                    .value();
  CHECK(group.parts_of(0).size() == kMinPartsPerShare);
}

TEST_CASE("Group formation: a joiner whose wait for BEGIN ended is left out of the group, with its companions",
          "[unit][avg][matchmaking]") {
  Peer p(search_for(8, 2));
  p.formation.hold();  // searching ahead: the group forms at our release, maybe after a joiner gave up
  const double now = p.clock.unix_seconds();
  auto join_waiting_until = [&](double until, std::vector<wire::JoinCompanion> companions = {}) {
    const crypto::PeerId who = p.other();
    auto join = join_as(AvgRole::kNode, std::move(companions));
    join.wait_until = until;
    REQUIRE_FALSE(p.formation.on_join(who, join, p.clock.now()));
    return who;
  };
  const auto patient = join_waiting_until(now + 10);
  const auto impatient = join_waiting_until(now + 2, {companion(p.other())});
  const auto unsaid = p.take();  // wait_until 0: a joiner that did not say, never dropped
  CHECK(p.formation.group_size() == 5);

  CHECK(p.formation.drop_given_up(now + 1).empty());
  // Within the BEGIN's transit of its end, a joiner may not hear it in time: it goes too.
  CHECK(p.formation.drop_given_up(now + 1.6) == std::vector<crypto::PeerId>{impatient});
  CHECK(p.formation.group_size() == 3);
  CHECK(p.formation.holds(patient));
  CHECK(p.formation.holds(unsaid));
  CHECK_FALSE(p.formation.holds(impatient));

  p.formation.release(p.clock.now());
  p.clock.advance(5s);
  REQUIRE(p.next() == NextStep::kAssemble);
  auto assembly = p.assemble();
  REQUIRE(assembly.group.is_ok());
  CHECK(assembly.group->size() == 3);
  CHECK_FALSE(assembly.group->index_of(impatient));
}

TEST_CASE("Group formation: a leader merging into an earlier one waits for it until just before its own followers stop",
          "[unit][avg][matchmaking]") {
  auto wait_with_followers_until = [](std::vector<double> seconds) {
    Peer p(search_for(8));  // deadline 5 s from now
    const double unix_now = p.clock.unix_seconds();
    const auto now = p.clock.now();
    for (double s : seconds) {
      auto join = join_as();
      join.wait_until = unix_now + s;
      REQUIRE_FALSE(p.formation.on_join(p.other(), join, now));
    }
    REQUIRE(p.formation.ask("tcp://10.0.0.9:5000/p/earlier"));
    return p.formation.answer_deadline(true, now, unix_now) - now;
  };
  // A BEGIN's transit (0.5 s) before the first follower stops: 6.3 s, past our deadline + 0.5 s.
  CHECK(std::chrono::abs(wait_with_followers_until({7.0, 6.8}) - 6300ms) < 1ms);
  // Never past what we would wait alone (deadline + 2 s), nor before now.
  CHECK(std::chrono::abs(wait_with_followers_until({60}) - 7s) < 1ms);
  CHECK(wait_with_followers_until({0.2}) == Duration::zero());
}
