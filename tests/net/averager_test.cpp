// The averager as a trainer and an aux peer use it: DHT matchmaking, then the all-reduce, on loopback.
#include <catch2/catch.hpp>

#include <cstring>
#include <future>
#include <set>
#include <thread>

#include "dedloc/avg/averager.hpp"
#include "dedloc/dht/local_swarm.hpp"
#include "support/quiet_swarm.hpp"

using namespace dedloc;
using namespace dedloc::avg;
using namespace std::chrono_literals;

TEST_CASE("Averager: three nodes and an aux peer average one step through the DHT", "[net][avg]") {
  Logger& quiet = test::quiet_log();
  auto swarm = test::quiet_swarm(4);
  zmq::context_t context;

  const VectorSchema schema{Bytes(wire::kSchemaHashBytes, 0x5c), 250001};
  std::vector<crypto::Identity> identities;
  std::vector<std::unique_ptr<Averager>> averagers;
  for (size_t i = 0; i < 4; ++i) {
    AveragerOptions options;
    options.run_id = "run7";
    options.role = i == 3 ? AvgRole::kAux : AvgRole::kNode;
    options.listen = "tcp://127.0.0.1:0";
    options.target_group_size = 4;
    options.matchmaking_time = 3s;
    options.part_elements = 10000;
    options.log = &quiet;
    identities.push_back(crypto::Identity::generate());
    averagers.push_back(std::make_unique<Averager>(context, swarm->node(i), identities.back(), options));
    REQUIRE(averagers.back()->start().is_ok());
  }
  // A node publishes the layout; the aux peer, which has no model, reads it.
  REQUIRE(publish_schema(swarm->node(0), "run7", schema, 10min, Deadline::after(5s)).is_ok());
  auto learned = read_schema(swarm->node(3), "run7", Deadline::after(5s));
  REQUIRE(learned.is_ok());
  REQUIRE(learned->has_value());
  CHECK((*learned)->hash == schema.hash);
  CHECK((*learned)->length == schema.length);

  std::vector<std::vector<float>> vectors(3, std::vector<float>(schema.length));
  const std::vector<double> weights{10, 20, 70};
  for (size_t i = 0; i < 3; ++i) {
    for (size_t k = 0; k < schema.length; ++k) vectors[i][k] = static_cast<float>((i + 1) * (k % 97)) - 40.0f;
  }
  std::vector<std::future<Result<StepOutcome>>> steps;
  for (size_t i = 0; i < 3; ++i) {
    steps.push_back(std::async(std::launch::async, [&, i] { return averagers[i]->step(schema, vectors[i], weights[i]); }));
  }
  steps.push_back(std::async(std::launch::async, [&] { return averagers[3]->step(**learned, {}, 0); }));
  Bytes group_id;
  for (size_t i = 0; i < 4; ++i) {
    auto outcome = steps[i].get();
    INFO("peer " << i);
    REQUIRE(outcome.is_ok());
    CHECK(outcome->group_size == 4);
    CHECK(outcome->all_reduce.averaged_fraction == 1.0);
    // Every member names the same group (dedloc-train's step lines carry it, so a checker can tell groups apart).
    CHECK(outcome->group_id.size() == wire::kGroupIdBytes);
    if (i == 0) group_id = outcome->group_id;
    CHECK(outcome->group_id == group_id);
  }
  // sum w_i (i+1) / sum w_i = (10 + 40 + 210) / 100 = 2.6
  for (size_t i = 0; i < 3; ++i) {
    double worst = 0;
    for (size_t k = 0; k < schema.length; ++k) {
      worst = std::max(worst, std::abs(vectors[i][k] - (2.6 * static_cast<double>(k % 97) - 40.0)));
    }
    CHECK(worst < 1e-4);
  }
}

TEST_CASE("Averager: alone, a step leaves the vector as it is and says why", "[net][avg]") {
  Logger& quiet = test::quiet_log();
  auto swarm = test::quiet_swarm(2);
  zmq::context_t context;
  AveragerOptions options;
  options.run_id = "lonely";
  options.listen = "tcp://127.0.0.1:0";
  options.matchmaking_time = 500ms;
  options.log = &quiet;
  auto identity = crypto::Identity::generate();
  Averager averager(context, swarm->node(0), identity, options);
  REQUIRE(averager.start().is_ok());
  std::vector<float> vector(100, 1.5f);
  auto outcome = averager.step(VectorSchema{Bytes(wire::kSchemaHashBytes, 1), 100}, vector, 1);
  REQUIRE(outcome.is_ok());
  CHECK(outcome->group_size == 0);
  CHECK_THAT(outcome->why_alone, Catch::Contains("no group"));
  CHECK(vector == std::vector<float>(100, 1.5f));
}

namespace {

// Three trainers' averagers in one run, with short timeouts so that a member left waiting shows quickly.
struct ThreeTrainers {
  Logger& quiet = test::quiet_log();
  std::unique_ptr<dht::LocalSwarm> swarm = test::quiet_swarm(3);
  zmq::context_t context;
  std::vector<crypto::Identity> identities;
  std::vector<std::unique_ptr<Averager>> averagers;
  const VectorSchema schema{Bytes(wire::kSchemaHashBytes, 0x3a), 40000};
  std::vector<std::vector<float>> vectors;
  const std::vector<double> weights{16, 32, 48};

  // `averaging_timeout`: the configured one, how long a hand-on (Averager::broadcast) may last.
  explicit ThreeTrainers(Duration averaging_timeout = 60s) {
    for (size_t i = 0; i < 3; ++i) {
      AveragerOptions options;
      options.run_id = "ahead";
      options.averaging_timeout = averaging_timeout;
      options.listen = "tcp://127.0.0.1:0";
      options.matchmaking_time = 3s;
      options.part_elements = 5000;
      options.all_reduce.sender_timeout = 3s;  // a member that never sends is banned after this
      options.all_reduce.reducer_timeout = 5s;
      options.log = &quiet;
      identities.push_back(crypto::Identity::generate());
      averagers.push_back(std::make_unique<Averager>(context, swarm->node(i), identities.back(), options));
      REQUIRE(averagers.back()->start().is_ok());
      vectors.emplace_back(schema.length);
      for (size_t k = 0; k < schema.length; ++k) vectors[i][k] = static_cast<float>((i + 1) * (k % 31)) - 7.0f;
    }
  }

  // Peer i's step for `what`, on its own thread, after `delay` (its batch finishing later).
  std::future<Result<StepOutcome>> step(size_t i, const std::string& what, Duration delay = Duration::zero()) {
    return std::async(std::launch::async, [this, i, what, delay] {
      std::this_thread::sleep_for(delay);
      return averagers[i]->step(schema, vectors[i], weights[i], 3, what);
    });
  }

  // The weights' mean of the vectors of `members`, at element k.
  double mean(const std::vector<size_t>& members, size_t k) const {
    double sum = 0, total = 0;
    for (size_t i : members) {
      sum += weights[i] * (static_cast<double>((i + 1) * (k % 31)) - 7.0);
      total += weights[i];
    }
    return sum / total;
  }
  double worst_error(size_t i, const std::vector<size_t>& members) const {
    double worst = 0;
    for (size_t k = 0; k < schema.length; ++k) worst = std::max(worst, std::abs(vectors[i][k] - mean(members, k)));
    return worst;
  }
  // Waits (up to 10 s) until the DHT lists `holders` holders of the result of `round` (the listings are
  // stored in the background): a fetch that began before the last landed would miss it.
  void wait_listed(const std::string& round, size_t holders) {
    const Deadline listed = Deadline::after(10s);
    for (;;) {
      auto found = swarm->node(2).get(wire::round_result_key("ahead_" + round), dht::GetMode::kLatest, listed);
      if (found.is_ok() && found->has_value() && (*found)->entries.size() == holders) return;
      REQUIRE_FALSE(listed.passed());
      std::this_thread::sleep_for(50ms);
    }
  }
};

}  // namespace

TEST_CASE("Averager: a group prepared ahead forms while peers compute, and each steps into it when ready", "[net][avg]") {
  ThreeTrainers t;
  for (auto& a : t.averagers) a->prepare(t.schema, 3, "grad.0");
  CHECK(t.averagers[0]->prepared_round() == "grad.0");
  // The peers finish their batches at different moments, as trainers do.
  std::vector<std::future<Result<StepOutcome>>> steps;
  for (size_t i = 0; i < 3; ++i) steps.push_back(t.step(i, "grad.0", std::chrono::milliseconds(400 * i)));
  for (size_t i = 0; i < 3; ++i) {
    INFO("peer " << i);
    auto outcome = steps[i].get();
    REQUIRE(outcome.is_ok());
    CHECK(outcome->group_size == 3);
    CHECK(outcome->found_ahead);
    CHECK(outcome->all_reduce.averaged_fraction == 1.0);
    CHECK(outcome->all_reduce.banned_senders.empty());
    CHECK(t.worst_error(i, {0, 1, 2}) < 1e-4);
    CHECK(t.averagers[i]->prepared_round().empty());
  }
}

TEST_CASE("Averager: a peer that gives up its prepared round still serves the group, contributing nothing",
          "[net][avg]") {
  ThreeTrainers t;
  for (auto& a : t.averagers) a->prepare(t.schema, 3, "grad.0");
  std::future<Result<StepOutcome>> third;
  SECTION("withdraw(): its gradients were not finite") {
    t.averagers[2]->withdraw();
    CHECK(t.averagers[2]->prepared_round().empty());
  }
  SECTION("a step for another round: it caught up with the swarm meanwhile") {
    third = t.step(2, "grad.5");
  }
  std::vector<std::future<Result<StepOutcome>>> steps;
  for (size_t i = 0; i < 2; ++i) steps.push_back(t.step(i, "grad.0"));
  for (size_t i = 0; i < 2; ++i) {
    INFO("peer " << i);
    auto outcome = steps[i].get();
    REQUIRE(outcome.is_ok());
    CHECK(outcome->group_size == 3);
    // Peer 2 reduced its share and sent weight 0: nobody was banned or given up, and its values are not in.
    CHECK(outcome->all_reduce.averaged_fraction == 1.0);
    CHECK(outcome->all_reduce.banned_senders.empty());
    CHECK(outcome->all_reduce.failed_reducers.empty());
    CHECK(t.worst_error(i, {0, 1}) < 1e-4);
  }
  if (third.valid()) {
    auto outcome = third.get();
    REQUIRE(outcome.is_ok());
    CHECK(outcome->group_size == 0);  // nobody else looks for round 5
    CHECK_FALSE(outcome->found_ahead);
  }
}

TEST_CASE("Averager: a member that missed a round takes its result, bit for bit, from one that held it",
          "[net][avg]") {
  ThreeTrainers t;
  // Peers 0 and 1 average a round among themselves, the way carriers of two buckets do; peer 2 comes late.
  auto first = std::async(std::launch::async, [&] {
    return t.averagers[0]->step(t.schema, t.vectors[0], t.weights[0], 2, "grad.5.x", wire::PartAnswer::kAverage);
  });
  auto second = t.averagers[1]->step(t.schema, t.vectors[1], t.weights[1], 2, "grad.5.x", wire::PartAnswer::kAverage);
  REQUIRE(first.get().is_ok());
  REQUIRE(second.is_ok());
  REQUIRE(second->group_size == 2);
  REQUIRE(t.vectors[0] == t.vectors[1]);  // the average itself: bit-identical on both
  CHECK(t.worst_error(0, {0, 1}) < 1e-4);
  t.averagers[0]->hold_result("grad.5.x", t.schema, t.vectors[0], 2);

  std::vector<float> late(t.schema.length, -1.0f);
  auto fetched = t.averagers[2]->fetch_result("grad.5.x", t.schema, late, Deadline::after(10s));
  REQUIRE(fetched.is_ok());
  CHECK(fetched->contributions == 2);
  CHECK_THAT(fetched->holder, Catch::Contains(t.averagers[0]->id().to_string()));
  CHECK(late == t.vectors[0]);

  // A round nobody holds: the listing stays empty, and the fetch gives up at its deadline, not before.
  const auto began = std::chrono::steady_clock::now();
  auto none = t.averagers[2]->fetch_result("grad.6.x", t.schema, late, Deadline::after(1s));
  REQUIRE_FALSE(none.is_ok());
  CHECK(none.status().code() == Code::kTimeout);
  CHECK(std::chrono::steady_clock::now() - began >= 900ms);
  CHECK(std::chrono::steady_clock::now() - began < 5s);

  // The same, for a caller that knows the round is over (its members moved on): it stops at the first
  // listing found empty after that, well before its deadline, and only then.
  int asked = 0;
  const auto over_at_second_listing = [&] { return ++asked >= 2; };
  const auto again = std::chrono::steady_clock::now();
  auto over = t.averagers[2]->fetch_result("grad.6.x", t.schema, late, Deadline::after(10s), 0, over_at_second_listing);
  REQUIRE_FALSE(over.is_ok());
  CHECK(over.status().code() == Code::kNotFound);
  CHECK_THAT(over.status().message(), Catch::Contains("the round is over"));
  CHECK(asked == 2);
  CHECK(std::chrono::steady_clock::now() - again < 5s);
  // A listed holder is fetched from whatever the caller says.
  std::fill(late.begin(), late.end(), -1.0f);
  auto held = t.averagers[2]->fetch_result("grad.5.x", t.schema, late, Deadline::after(10s), 0, [] { return true; });
  REQUIRE(held.is_ok());
  CHECK(late == t.vectors[0]);
}

TEST_CASE("Averager: a late member takes the result with the most contributions, passes over a holder that moved "
          "on, and a carrier with a result of its own asks only for a larger one", "[net][avg]") {
  ThreeTrainers t;
  // Two groups formed under one key, one of them of more contributions than the other.
  t.averagers[0]->hold_result("grad.7.x", t.schema, t.vectors[0], 1);
  t.averagers[1]->hold_result("grad.7.x", t.schema, t.vectors[1], 3);
  // A fetch that began before the second listing landed would take the first (what a late member does:
  // the best of what is listed).
  t.wait_listed("grad.7.x", 2);
  std::vector<float> late(t.schema.length);
  auto fetched = t.averagers[2]->fetch_result("grad.7.x", t.schema, late, Deadline::after(10s));
  REQUIRE(fetched.is_ok());
  CHECK(fetched->contributions == 3);
  CHECK(late == t.vectors[1]);
  // A carrier whose own carriers' round held 1 bucket asks for a larger result: the one of 3. One whose
  // round held 3 finds none larger, and hears so from the one listing read, not at its deadline.
  std::fill(late.begin(), late.end(), -1.0f);
  fetched = t.averagers[2]->fetch_result("grad.7.x", t.schema, late, Deadline::after(10s), 1);
  REQUIRE(fetched.is_ok());
  CHECK(fetched->contributions == 3);
  CHECK(late == t.vectors[1]);
  const auto began = std::chrono::steady_clock::now();
  auto larger = t.averagers[2]->fetch_result("grad.7.x", t.schema, late, Deadline::after(10s), 3);
  CHECK(larger.status().code() == Code::kNotFound);
  CHECK(std::chrono::steady_clock::now() - began < 5s);
  // Peer 1 moves on to the next round: it no longer holds grad.7.x, though the DHT still lists it first.
  t.averagers[1]->hold_result("grad.8.x", t.schema, t.vectors[1], 3);
  fetched = t.averagers[2]->fetch_result("grad.7.x", t.schema, late, Deadline::after(10s));
  REQUIRE(fetched.is_ok());
  CHECK(fetched->contributions == 1);
  CHECK(late == t.vectors[0]);
  // A result of another model (another schema hash) is never taken.
  const VectorSchema other{Bytes(wire::kSchemaHashBytes, 0x77), t.schema.length};
  auto wrong = t.averagers[2]->fetch_result("grad.8.x", other, late, Deadline::after(1s));
  CHECK(wrong.status().code() == Code::kTimeout);
}

TEST_CASE("Averager: readers of a round's result spread over the holders of as many contributions", "[net][avg]") {
  // Carriers that averaged together hold the same result, listed with as many contributions. The readers of
  // that listing come many at once (a dead carrier's receivers, a bucket's latecomers): each asks them in
  // an order of its own, not all of them the first listed.
  ThreeTrainers t;
  t.averagers[0]->hold_result("grad.9.x", t.schema, t.vectors[0], 2);
  t.averagers[1]->hold_result("grad.9.x", t.schema, t.vectors[1], 2);
  t.wait_listed("grad.9.x", 2);
  std::set<std::string> holders;
  std::vector<float> late(t.schema.length);
  for (int i = 0; i < 24 && holders.size() < 2; ++i) {  // the same holder 24 times: 1 in 2^23 by chance
    auto fetched = t.averagers[2]->fetch_result("grad.9.x", t.schema, late, Deadline::after(10s));
    REQUIRE(fetched.is_ok());
    holders.insert(fetched->holder);
  }
  CHECK(holders.size() == 2);
}

TEST_CASE("Averager: a receiver whose carrier died takes the ranges it missed from a holder of as many buckets",
          "[net][avg]") {
  // The carriers that averaged with a carrier hold what it handed on, listed with the buckets it told its
  // receivers (train/trainer.cpp): a receiver fetches only the ranges missing, and only from a holder of
  // that many, passing over a larger result (another round of carriers, other values).
  ThreeTrainers t;
  t.averagers[0]->hold_result("grad.7.x", t.schema, t.vectors[0], 2);
  t.averagers[1]->hold_result("grad.7.x", t.schema, t.vectors[1], 3);
  t.wait_listed("grad.7.x", 2);
  std::vector<float> mine(t.schema.length, 5.0f);
  auto rest = t.averagers[2]->fetch_result_ranges("grad.7.x", t.schema, mine, {{10, 20}, {30, 31}}, 2,
                                                  Deadline::after(10s));
  REQUIRE(rest.is_ok());
  CHECK(rest->contributions == 2);
  CHECK_THAT(rest->holder, Catch::Contains(t.averagers[0]->id().to_string()));
  for (size_t k = 0; k < mine.size(); ++k) {
    const bool asked = (k >= 10 && k < 20) || k == 30;
    INFO("element " << k);
    REQUIRE(mine[k] == (asked ? t.vectors[0][k] : 5.0f));
  }
  // Nobody holds a result of 4 buckets: nothing is taken, by the deadline.
  std::vector<float> untouched(t.schema.length, 5.0f);
  auto none = t.averagers[2]->fetch_result_ranges("grad.7.x", t.schema, untouched, {{0, 10}}, 4, Deadline::after(1s));
  CHECK(none.status().code() == Code::kTimeout);
  CHECK(untouched == std::vector<float>(t.schema.length, 5.0f));
}

TEST_CASE("Averager: a receiver mends, from the broadcaster, the slice of a hand-on that a dead member reduced",
          "[net][avg]") {
  // The cross-bucket stage's hand-on (train/trainer.cpp): each member of the group reduces a slice of the
  // carrier's values, so one that dies in it costs every receiver that slice. The carrier keeps what it
  // hands on, and a receiver fetches the slices that did not come through from it, bit for bit.
  ThreeTrainers t(/*averaging_timeout=*/4s);
  {
    auto second = t.step(1, "grad.9");
    auto third = t.step(2, "grad.9");
    auto first = t.averagers[0]->step(t.schema, t.vectors[0], t.weights[0], 3, "grad.9");
    REQUIRE(first.is_ok());
    REQUIRE(first->group_size == 3);
    REQUIRE(second.get().is_ok());
    REQUIRE(third.get().is_ok());
  }
  auto group = t.averagers[0]->last_group()->hand_on();
  REQUIRE(group.is_ok());
  const auto carrier = group->index_of(t.averagers[0]->id());
  REQUIRE(carrier.has_value());
  REQUIRE_FALSE(group->parts_of(*group->index_of(t.averagers[2]->id())).empty());  // it reduces a slice

  t.averagers[2].reset();  // dies before the hand-on: its port refuses from now on
  std::vector<float> carried(t.schema.length);
  for (size_t k = 0; k < carried.size(); ++k) carried[k] = 0.001f * static_cast<float>(k) - 3.0f;
  carried[5] = -0.0f;  // taken as it is, sign included
  t.averagers[0]->keep_result("grad.9.x", t.schema, carried, 2);
  auto handing = std::async(std::launch::async, [&] { return t.averagers[0]->broadcast(*group, carried, 2.0); });
  std::vector<float> received(t.schema.length, 7.0f);  // what the receiver held: its bucket's own average
  auto got = t.averagers[1]->broadcast(*group, received, 0.0);
  REQUIRE(handing.get().is_ok());
  REQUIRE(got.is_ok());
  CHECK(got->all_reduce.averaged_fraction < 1);
  CHECK(got->all_reduce.least_weight == 2.0);  // what the carrier told, from the parts that came
  const avg::ElementRanges missing = got->all_reduce.unaveraged;
  REQUIRE_FALSE(missing.empty());
  CHECK(received[missing.front().first] == 7.0f);  // its own value where the dead member's slice was

  // Only what is asked for is fetched: a range of elements, the rest left as it is.
  std::vector<float> probe(t.schema.length, 1.0f);
  auto some = t.averagers[1]->fetch_result_from(group->member(*carrier), "grad.9.x", t.schema, probe, {{10, 20}},
                                                Deadline::after(5s));
  REQUIRE(some.is_ok());
  CHECK(some->contributions == 2);
  CHECK(probe[9] == 1.0f);
  CHECK(probe[10] == carried[10]);
  CHECK(probe[19] == carried[19]);
  CHECK(probe[20] == 1.0f);

  auto mended = t.averagers[1]->fetch_result_from(group->member(*carrier), "grad.9.x", t.schema, received, missing,
                                                  Deadline::after(5s));
  REQUIRE(mended.is_ok());
  CHECK(mended->contributions == 2);
  CHECK(std::memcmp(received.data(), carried.data(), carried.size() * sizeof(float)) == 0);

  // What the carrier does not hold, or a range past the end, is refused.
  CHECK_FALSE(t.averagers[1]->fetch_result_from(group->member(*carrier), "grad.10.x", t.schema, probe, {{0, 10}},
                                                Deadline::after(5s)).is_ok());
  CHECK(t.averagers[1]->fetch_result_from(group->member(*carrier), "grad.9.x", t.schema, probe,
                                          {{0, t.schema.length + 1}}, Deadline::after(5s)).status().code() ==
        Code::kInvalidArgument);
  // A result already held for the round (listed for late carriers) is not replaced by what is kept.
  t.averagers[0]->keep_result("grad.9.x", t.schema, probe, 5);
  auto again = t.averagers[1]->fetch_result_from(group->member(*carrier), "grad.9.x", t.schema, probe, {{0, 4}},
                                                 Deadline::after(5s));
  REQUIRE(again.is_ok());
  CHECK(again->contributions == 2);
}

TEST_CASE("Averager: a member that withdrew from a group is not waited for in the group's hand-on", "[net][avg]") {
  // A trainer that gives up a group found ahead (it loads the swarm's state instead) serves the group's round
  // without contributing, but not the hand-on its trainers run after it: it refuses that round at once, so the
  // others give up on its slice (and mend it from the carrier) instead of waiting to the averaging deadline.
  ThreeTrainers t(/*averaging_timeout=*/30s);
  for (size_t i = 0; i < 3; ++i) t.averagers[i]->prepare(t.schema, 3, "grad.11");
  const Deadline formed = Deadline::after(10s);
  for (size_t i = 0; i < 3; ++i) {
    while (t.averagers[i]->ahead_search() != Averager::AheadSearch::kFound) {
      REQUIRE(t.averagers[i]->ahead_search() != Averager::AheadSearch::kNotFound);
      REQUIRE_FALSE(formed.passed());
      std::this_thread::sleep_for(20ms);
    }
  }
  t.averagers[2]->withdraw();
  {
    auto second = t.step(1, "grad.11");
    auto first = t.averagers[0]->step(t.schema, t.vectors[0], t.weights[0], 3, "grad.11");
    REQUIRE(first.is_ok());
    REQUIRE(first->group_size == 3);
    REQUIRE(second.get().is_ok());
  }
  auto group = t.averagers[0]->last_group()->hand_on();
  REQUIRE(group.is_ok());
  REQUIRE(group->size() == 3);
  const auto carrier = group->index_of(t.averagers[0]->id());
  REQUIRE(carrier.has_value());

  const std::vector<float> carried(t.schema.length, 0.25f);
  t.averagers[0]->keep_result("grad.11.x", t.schema, carried, 2);
  const auto began = std::chrono::steady_clock::now();
  auto handing = std::async(std::launch::async, [&] {
    std::vector<float> values = carried;
    return t.averagers[0]->broadcast(*group, values, 2.0);
  });
  std::vector<float> received(t.schema.length, 7.0f);
  auto got = t.averagers[1]->broadcast(*group, received, 0.0);
  REQUIRE(handing.get().is_ok());
  REQUIRE(got.is_ok());
  // The withdrawn member's sender timeout (3 s), not the 30 s a hand-on may last.
  CHECK(std::chrono::steady_clock::now() - began < 15s);
  CHECK(got->all_reduce.averaged_fraction < 1);
  REQUIRE(t.averagers[1]->fetch_result_from(group->member(*carrier), "grad.11.x", t.schema, received,
                                            got->all_reduce.unaveraged, Deadline::after(5s)).is_ok());
  CHECK(received == carried);
}
