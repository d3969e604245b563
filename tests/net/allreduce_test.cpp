// The butterfly all-reduce between in-process peers on real loopback sockets (docs/architecture.md):
// exact weighted means, every role, odd sizes, codecs, and members that never show up.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <cstring>
#include <future>
#include <random>
#include <thread>

#include "dedloc/avg/all_reduce.hpp"
#include "dedloc/crypto/identity.hpp"

using namespace dedloc;
using namespace dedloc::avg;
using namespace std::chrono_literals;

namespace {

// One member: a server (its reducer), a client (its sends) and the all-reduce on them.
struct Peer {
  crypto::Identity identity = crypto::Identity::generate();
  std::unique_ptr<net::Server> server;
  std::unique_ptr<net::Client> client;
  std::unique_ptr<AllReduce> all_reduce;

  Peer(zmq::context_t& context, Logger* log) {
    server = std::make_unique<net::Server>(context, net::ServerOptions{"tcp://127.0.0.1:0", identity.peer_id(), {}, log});
    client = std::make_unique<net::Client>(context, net::ClientOptions{identity.peer_id(), {}, 60s, log});
    all_reduce = std::make_unique<AllReduce>(*server, *client, identity.peer_id(), log);
    REQUIRE(server->start().is_ok());
  }
  ~Peer() { server->stop(); }  // before the all-reduce its handler points into
};

struct Setup {
  std::vector<AvgRole> roles;
  std::vector<double> weights;  // 0 for aux
  std::vector<std::uint64_t> counts;
  std::uint64_t part_elements = 1000;
};

Group make_group(const std::vector<std::unique_ptr<Peer>>& peers, const Setup& setup) {
  static std::uint8_t rounds = 0;
  wire::AvgBegin begin;
  begin.group_id = Bytes(wire::kGroupIdBytes, ++rounds);  // every round its own id, as leaders draw them
  begin.part_elements = setup.part_elements;
  for (size_t i = 0; i < peers.size(); ++i) {
    begin.ids.push_back(peers[i]->identity.peer_id());
    begin.endpoints.push_back(setup.roles[i] == AvgRole::kClient ? "" : peers[i]->server->endpoint());
    begin.roles.push_back(setup.roles[i]);
    begin.counts.push_back(setup.counts[i]);
    begin.length += setup.counts[i];
  }
  auto group = Group::from_begin(begin);
  REQUIRE(group.is_ok());
  return std::move(group.value());
}

std::vector<std::vector<float>> random_vectors(size_t n, size_t length, std::uint64_t seed) {
  std::mt19937 rng(static_cast<std::uint32_t>(seed));
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<std::vector<float>> out(n, std::vector<float>(length));
  for (auto& v : out) {
    for (auto& x : v) x = normal(rng);
  }
  return out;
}

// The weighted mean of `vectors` over the members in `included`.
std::vector<double> weighted_mean(const std::vector<std::vector<float>>& vectors, const std::vector<double>& weights,
                                  const std::vector<size_t>& included) {
  std::vector<double> mean(vectors[included.front()].size(), 0.0);
  double total = 0;
  for (size_t i : included) {
    for (size_t k = 0; k < mean.size(); ++k) mean[k] += weights[i] * vectors[i][k];
    total += weights[i];
  }
  for (auto& m : mean) m /= total;
  return mean;
}

// Largest |a - b| relative to the largest |b| (the scale of the values), over [begin, end).
double relative_error(const std::vector<float>& a, const std::vector<double>& b, size_t begin = 0, size_t end = SIZE_MAX) {
  end = std::min(end, a.size());
  double worst = 0, scale = 1e-30;
  for (size_t k = begin; k < end; ++k) {
    worst = std::max(worst, std::abs(a[k] - b[k]));
    scale = std::max(scale, std::abs(b[k]));
  }
  return worst / scale;
}

// Runs every peer's round on its own thread; returns their results.
std::vector<Result<AllReduceResult>> run_all(std::vector<std::unique_ptr<Peer>>& peers, const Group& group,
                                             std::vector<std::vector<float>>& vectors, const Setup& setup,
                                             const AllReduceOptions& options, std::vector<bool> present = {}) {
  if (present.empty()) present.assign(peers.size(), true);
  std::vector<std::future<Result<AllReduceResult>>> futures;
  for (size_t i = 0; i < peers.size(); ++i) {
    if (!present[i]) continue;
    futures.push_back(std::async(std::launch::async, [&, i] {
      std::span<float> vector = setup.roles[i] == AvgRole::kAux ? std::span<float>() : std::span<float>(vectors[i]);
      return peers[i]->all_reduce->run(group, vector, setup.weights[i], options, Deadline::after(60s));
    }));
  }
  std::vector<Result<AllReduceResult>> results;
  for (auto& f : futures) results.push_back(f.get());
  return results;
}

Logger& quiet() {
  static Logger log(LogLevel::kError);
  return log;
}

}  // namespace

TEST_CASE("All-reduce: exact weighted means for 2 to 8 nodes, odd sizes, uneven shares and weights", "[net][avg]") {
  zmq::context_t context;
  for (size_t n : {2, 3, 5, 8}) {
    std::vector<std::unique_ptr<Peer>> peers;
    for (size_t i = 0; i < n; ++i) peers.push_back(std::make_unique<Peer>(context, &quiet()));
    Setup setup;
    setup.part_elements = 977;  // parts of odd size, not dividing any range
    for (size_t i = 0; i < n; ++i) {
      setup.roles.push_back(AvgRole::kNode);
      setup.weights.push_back(1.0 + 3.0 * static_cast<double>(i));  // samples: 1, 4, 7, ...
      setup.counts.push_back(10007 + 1013 * i);                        // uneven shares
    }
    Group group = make_group(peers, setup);
    auto vectors = random_vectors(n, group.length(), n);
    const auto original = vectors;
    std::vector<size_t> everyone(n);
    for (size_t i = 0; i < n; ++i) everyone[i] = i;
    auto expected = weighted_mean(original, setup.weights, everyone);

    auto results = run_all(peers, group, vectors, setup, AllReduceOptions{});
    for (size_t i = 0; i < n; ++i) {
      INFO("n = " << n << ", member " << i);
      REQUIRE(results[i].is_ok());
      CHECK(results[i]->averaged_fraction == 1.0);
      CHECK(results[i]->banned_senders.empty());
      CHECK(results[i]->failed_reducers.empty());
      CHECK(results[i]->unaveraged.empty());
      CHECK(relative_error(vectors[i], expected) <= 1e-6);
      // The bytes it sent: every element outside its own share at least once (its parts; a part sent before
      // its reducer heard of the round is sent again, and counts again), and its share's deltas to each of
      // the n - 1 other senders; 4 bytes each without a codec.
      const std::uint64_t share = setup.counts[i], length = group.length();
      const std::uint64_t deltas = 4 * (n - 1) * share, parts = 4 * (length - share);
      CHECK(results[i]->bytes_sent >= parts + deltas);
      CHECK(results[i]->bytes_sent <= 2 * parts + deltas);
    }
  }
}

TEST_CASE("All-reduce with client-mode and aux members: clients send only, aux members reduce only", "[net][avg]") {
  zmq::context_t context;
  std::vector<std::unique_ptr<Peer>> peers;
  for (size_t i = 0; i < 5; ++i) peers.push_back(std::make_unique<Peer>(context, &quiet()));
  Setup setup;
  setup.roles = {AvgRole::kNode, AvgRole::kClient, AvgRole::kAux, AvgRole::kNode, AvgRole::kClient};
  setup.weights = {32, 8, 0, 64, 16};
  setup.counts = {40000, 0, 50001, 30000, 0};  // the aux member reduces the biggest share
  Group group = make_group(peers, setup);
  auto vectors = random_vectors(5, group.length(), 11);
  vectors[2].clear();  // an aux member has no vector of its own
  const auto original = vectors;
  auto expected = weighted_mean(original, setup.weights, {0, 1, 3, 4});

  auto results = run_all(peers, group, vectors, setup, AllReduceOptions{});
  for (size_t i : {0, 1, 3, 4}) {
    INFO("member " << i);
    REQUIRE(results[i].is_ok());
    CHECK(results[i]->averaged_fraction == 1.0);
    CHECK(relative_error(vectors[i], expected) <= 1e-6);
  }
  REQUIRE(results[2].is_ok());
}

TEST_CASE("All-reduce with many small tensors' worth of tiny parts", "[net][avg]") {
  zmq::context_t context;
  std::vector<std::unique_ptr<Peer>> peers;
  for (size_t i = 0; i < 3; ++i) peers.push_back(std::make_unique<Peer>(context, &quiet()));
  Setup setup{{AvgRole::kNode, AvgRole::kNode, AvgRole::kNode}, {1, 2, 3}, {1001, 1, 998}, 7};
  Group group = make_group(peers, setup);
  auto vectors = random_vectors(3, group.length(), 3);
  auto expected = weighted_mean(vectors, setup.weights, {0, 1, 2});
  auto results = run_all(peers, group, vectors, setup, AllReduceOptions{.window = 3});
  for (size_t i = 0; i < 3; ++i) {
    REQUIRE(results[i].is_ok());
    CHECK(relative_error(vectors[i], expected) <= 1e-6);
  }
}

TEST_CASE("All-reduce with codecs stays within each codec's bound", "[net][avg]") {
  zmq::context_t context;
  std::vector<std::unique_ptr<Peer>> peers;
  for (size_t i = 0; i < 4; ++i) peers.push_back(std::make_unique<Peer>(context, &quiet()));
  Setup setup{{AvgRole::kNode, AvgRole::kNode, AvgRole::kNode, AvgRole::kNode}, {1, 1, 2, 4}, {5000, 7000, 3001, 9000}, 2048};
  for (Codec codec : {Codec::kFloat16, Codec::kScaledFloat16, Codec::kUniform8Bit, Codec::kBlockwise8Bit}) {
    Group group = make_group(peers, setup);
    auto vectors = random_vectors(4, group.length(), 5);
    auto expected = weighted_mean(vectors, setup.weights, {0, 1, 2, 3});
    // A part's error: each sender's contribution is rounded once on the way in and the answer (the delta,
    // or the average) once on the way back, so the result is within the bound of the values plus the
    // bound of the answers.
    double bound = 0;
    for (const auto& v : vectors) bound = std::max(bound, error_bound(codec, v));
    for (auto answer : {wire::PartAnswer::kAverage, wire::PartAnswer::kDelta}) {
      auto round = vectors;
      auto results = run_all(peers, group, round, setup, AllReduceOptions{.codec = codec, .answer = answer});
      for (size_t i = 0; i < 4; ++i) {
        INFO("codec " << codec_name(codec) << ", answer " << static_cast<int>(answer) << ", member " << i);
        REQUIRE(results[i].is_ok());
        double worst = 0;
        for (size_t k = 0; k < expected.size(); ++k) worst = std::max(worst, std::abs(round[i][k] - expected[k]));
        CHECK(worst <= 3 * bound);
        CHECK(worst > 0);  // the codec really was used
      }
      group = make_group(peers, setup);
    }
  }
}

TEST_CASE("All-reduce: members that ask for the average end bit-identical, in every codec", "[net][avg]") {
  zmq::context_t context;
  std::vector<std::unique_ptr<Peer>> peers;
  for (size_t i = 0; i < 4; ++i) peers.push_back(std::make_unique<Peer>(context, &quiet()));
  // Uneven weights and shares, a client (no reducer of its own) and values of mixed magnitude, so that
  // adding a delta to one's own values would round differently on every member.
  Setup setup{{AvgRole::kNode, AvgRole::kClient, AvgRole::kNode, AvgRole::kNode}, {3, 1, 7, 2}, {5003, 0, 2999, 6011}, 1021};
  for (Codec codec : {Codec::kNone, Codec::kFloat16, Codec::kScaledFloat16, Codec::kUniform8Bit, Codec::kBlockwise8Bit}) {
    Group group = make_group(peers, setup);
    auto vectors = random_vectors(4, group.length(), 17);
    for (size_t k = 0; k < vectors[0].size(); k += 3) vectors[1][k] *= 1000.0f;
    auto results = run_all(peers, group, vectors, setup, AllReduceOptions{.codec = codec});
    for (size_t i = 0; i < 4; ++i) {
      INFO("codec " << codec_name(codec) << ", member " << i);
      REQUIRE(results[i].is_ok());
      CHECK(results[i]->averaged_fraction == 1.0);
      CHECK(std::memcmp(vectors[i].data(), vectors[0].data(), vectors[0].size() * sizeof(float)) == 0);
    }
  }
  // The same round answered with deltas leaves members apart in the last bits (what the average avoids).
  Group group = make_group(peers, setup);
  auto vectors = random_vectors(4, group.length(), 17);
  for (size_t k = 0; k < vectors[0].size(); k += 3) vectors[1][k] *= 1000.0f;
  auto results = run_all(peers, group, vectors, setup, AllReduceOptions{.answer = wire::PartAnswer::kDelta});
  size_t differing = 0;
  for (size_t k = 0; k < vectors[0].size(); ++k) differing += vectors[1][k] != vectors[0][k] ? 1 : 0;
  CHECK(differing > 0);
}

TEST_CASE("All-reduce: a member that never shows up is banned as a sender and given up as a reducer", "[net][avg]") {
  zmq::context_t context;
  std::vector<std::unique_ptr<Peer>> peers;
  for (size_t i = 0; i < 4; ++i) peers.push_back(std::make_unique<Peer>(context, &quiet()));
  Setup setup{{AvgRole::kNode, AvgRole::kNode, AvgRole::kNode, AvgRole::kNode}, {1, 2, 3, 4}, {3000, 3000, 3000, 3000}, 500};
  Group group = make_group(peers, setup);
  auto vectors = random_vectors(4, group.length(), 9);
  const auto original = vectors;
  peers[3]->server->stop();  // it crashed before the round: its reducer is silent too
  AllReduceOptions options{.sender_timeout = 500ms, .reducer_timeout = 1000ms};
  auto started = std::chrono::steady_clock::now();
  auto results = run_all(peers, group, vectors, setup, options, {true, true, true, false});
  auto took = std::chrono::steady_clock::now() - started;
  CHECK(took < options.reducer_timeout + 1500ms);

  auto without = weighted_mean(original, setup.weights, {0, 1, 2});
  const size_t dead_begin = 9000;  // member 3's range: [9000, 12000)
  for (size_t i = 0; i < 3; ++i) {
    INFO("member " << i);
    REQUIRE(results[i].is_ok());
    CHECK(results[i]->banned_senders == std::vector<crypto::PeerId>{peers[3]->identity.peer_id()});
    CHECK(results[i]->unheard_senders == std::vector<crypto::PeerId>{peers[3]->identity.peer_id()});
    CHECK(results[i]->failed_reducers == std::vector<crypto::PeerId>{peers[3]->identity.peer_id()});
    CHECK(results[i]->averaged_fraction == Approx(0.75));
    CHECK(results[i]->unaveraged == std::vector<std::pair<std::uint64_t, std::uint64_t>>{{9000, 12000}});
    // The survivors' ranges: the mean of the three that sent. The dead reducer's range: untouched.
    CHECK(relative_error(vectors[i], without, 0, dead_begin) <= 1e-6);
    for (size_t k = dead_begin; k < group.length(); ++k) REQUIRE(vectors[i][k] == original[i][k]);
    // Its whole share zeroed, the survivors hold the same values again; one member dropped out.
    CHECK(zero_failed_shares(*results[i], group, vectors[i]) == 1);
    for (size_t k = dead_begin; k < group.length(); ++k) REQUIRE(vectors[i][k] == 0.0f);
    CHECK(relative_error(vectors[i], without, 0, dead_begin) <= 1e-6);
  }
  CHECK(vectors[0] == vectors[1]);
  CHECK(vectors[1] == vectors[2]);
}

TEST_CASE("All-reduce: a member with weight 0 takes part without contributing", "[net][avg]") {
  zmq::context_t context;
  std::vector<std::unique_ptr<Peer>> peers;
  for (size_t i = 0; i < 3; ++i) peers.push_back(std::make_unique<Peer>(context, &quiet()));
  // Member 2 found the group but has nothing to give: it still reduces the biggest share.
  Setup setup{{AvgRole::kNode, AvgRole::kNode, AvgRole::kNode}, {3, 5, 0}, {2000, 3000, 7001}, 1000};
  Group group = make_group(peers, setup);
  auto vectors = random_vectors(3, group.length(), 21);
  auto expected = weighted_mean(vectors, setup.weights, {0, 1});
  auto results = run_all(peers, group, vectors, setup, AllReduceOptions{});
  for (size_t i = 0; i < 3; ++i) {
    INFO("member " << i);
    REQUIRE(results[i].is_ok());
    CHECK(results[i]->averaged_fraction == 1.0);
    CHECK(results[i]->banned_senders.empty());
    CHECK(relative_error(vectors[i], expected) <= 1e-6);  // member 2 receives the others' mean too
  }
}

TEST_CASE("All-reduce: a member at weight 0 with zeros sends no values, and gets what the others average", "[net][avg]") {
  zmq::context_t context;
  std::vector<std::unique_ptr<Peer>> peers;
  for (size_t i = 0; i < 3; ++i) peers.push_back(std::make_unique<Peer>(context, &quiet()));
  // Member 2 takes part at weight 0 with a vector of zeros (a peer catching up while it downloads) and
  // reduces nothing: everything it sends would be its parts, and it sends none of their values.
  Setup setup{{AvgRole::kNode, AvgRole::kNode, AvgRole::kNode}, {3, 5, 0}, {3000, 4001, 0}, 1000};
  for (Codec codec : {Codec::kNone, Codec::kFloat16, Codec::kUniform8Bit}) {
    for (auto answer : {wire::PartAnswer::kAverage, wire::PartAnswer::kDelta}) {
      INFO("codec " << codec_name(codec) << ", answer " << static_cast<int>(answer));
      Group group = make_group(peers, setup);
      auto vectors = random_vectors(3, group.length(), 23);
      std::fill(vectors[2].begin(), vectors[2].end(), 0.0f);
      auto expected = weighted_mean(vectors, setup.weights, {0, 1});
      double bound = 0;  // rounded once on the way in and once on the way back (the codecs' test above)
      for (size_t i = 0; i < 2; ++i) bound = std::max(bound, error_bound(codec, vectors[i]));
      auto results = run_all(peers, group, vectors, setup, AllReduceOptions{.codec = codec, .answer = answer});
      for (size_t i = 0; i < 3; ++i) REQUIRE(results[i].is_ok());
      CHECK(results[2]->bytes_sent == 0);
      CHECK(results[0]->bytes_sent > 0);
      for (size_t i = 0; i < 3; ++i) {
        INFO("member " << i);
        CHECK(results[i]->averaged_fraction == 1.0);
        CHECK(results[i]->banned_senders.empty());
        if (codec == Codec::kNone) {
          CHECK(relative_error(vectors[i], expected) <= 1e-6);
        } else {
          double worst = 0;
          for (size_t k = 0; k < expected.size(); ++k) worst = std::max(worst, std::abs(vectors[i][k] - expected[k]));
          CHECK(worst <= 3 * bound);
        }
      }
      // The zero-weight member ends with what member 0 holds, as a member that sent its zeros would.
      if (answer == wire::PartAnswer::kAverage) {
        CHECK(std::memcmp(vectors[2].data(), vectors[0].data(), vectors[0].size() * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("All-reduce: rounds summed in a fixed order end bit-identical across groups holding the same contributions",
          "[net][avg]") {
  // The cross-bucket stage's case (collab/group_buckets.hpp): three buckets' averages (keys 0, 1, 2, at their
  // buckets' weights) meet in two slots whose members, reducers, shares and timing differ; one slot has
  // a member at weight 0 holding other values. Summed as the parts arrive, the two slots' float sums take
  // different orders and differ in the last bits; in key order they are the same sum.
  zmq::context_t context;
  std::vector<std::unique_ptr<Peer>> slot_a, slot_b;
  for (size_t i = 0; i < 3; ++i) slot_a.push_back(std::make_unique<Peer>(context, &quiet()));
  for (size_t i = 0; i < 4; ++i) slot_b.push_back(std::make_unique<Peer>(context, &quiet()));
  const std::vector<double> bucket_weight{48, 80, 112};
  // Slot a: buckets 0, 1, 2 in that order; slot b: buckets 2, 0, an extra at weight 0, then 1.
  const std::vector<size_t> bucket_a{0, 1, 2}, bucket_b{2, 0, 0, 1};
  const std::vector<bool> extra_b{false, false, true, false};
  Setup setup_a{{AvgRole::kNode, AvgRole::kNode, AvgRole::kNode}, {}, {4001, 3000, 2999}, 997};
  Setup setup_b{{AvgRole::kNode, AvgRole::kClient, AvgRole::kNode, AvgRole::kNode}, {}, {1000, 0, 6000, 3000}, 1499};
  for (Codec codec : {Codec::kNone, Codec::kFloat16}) {
    for (bool ordered : {true, false}) {
      INFO("codec " << codec_name(codec) << (ordered ? ", in key order" : ", as the parts arrive"));
      const Group group_a = make_group(slot_a, setup_a);
      const Group group_b = make_group(slot_b, setup_b);
      // Each bucket's average, as its members hold it after their bucket's round (in the codec's values).
      auto averages = random_vectors(3, group_a.length(), 31);
      for (auto& v : averages) {
        for (size_t k = 0; k < v.size(); k += 5) v[k] *= 1000.0f;  // mixed magnitudes: order shows in the sums
        if (codec == Codec::kFloat16) {
          std::vector<std::uint8_t> bytes(encoded_bytes(codec, v.size()));
          encode(codec, v, bytes);
          REQUIRE(decode(codec, bytes, v).is_ok());
        }
      }
      auto run_slot = [&](std::vector<std::unique_ptr<Peer>>& peers, const Group& group,
                          const std::vector<size_t>& buckets, const std::vector<bool>& extra) {
        std::vector<std::vector<float>> vectors;
        std::vector<std::future<Result<AllReduceResult>>> futures;
        for (size_t i = 0; i < peers.size(); ++i) vectors.push_back(averages[buckets[i]]);
        for (size_t i = 0; i < peers.size(); ++i) {
          futures.push_back(std::async(std::launch::async, [&, i] {
            AllReduceOptions options{.codec = codec};
            if (ordered) options.order_key = buckets[i];
            const double weight = extra[i] ? 0.0 : bucket_weight[buckets[i]];
            return peers[i]->all_reduce->run(group, vectors[i], weight, options, Deadline::after(60s));
          }));
        }
        for (size_t i = 0; i < peers.size(); ++i) {
          auto result = futures[i].get();
          REQUIRE(result.is_ok());
          CHECK(result->averaged_fraction == 1.0);
          CHECK(result->weight == 240);  // 48 + 80 + 112: every member learns the slot's weight
          CHECK(result->least_weight == 240);  // one total: the least is it
        }
        return vectors;
      };
      const auto a = run_slot(slot_a, group_a, bucket_a, {false, false, false});
      const auto b = run_slot(slot_b, group_b, bucket_b, extra_b);
      const auto expected = weighted_mean(averages, bucket_weight, {0, 1, 2});
      for (const auto& v : a) CHECK(relative_error(v, expected) <= (codec == Codec::kNone ? 1e-6 : 1e-3));
      // Within a slot, every member holds the same bytes (the average answer); across slots, only in key order.
      for (const auto& v : a) CHECK(std::memcmp(v.data(), a[0].data(), v.size() * sizeof(float)) == 0);
      for (const auto& v : b) CHECK(std::memcmp(v.data(), b[0].data(), v.size() * sizeof(float)) == 0);
      size_t differing = 0;
      for (size_t k = 0; k < a[0].size(); ++k) differing += a[0][k] != b[0][k] ? 1 : 0;
      if (ordered) {
        CHECK(differing == 0);
      } else if (codec == Codec::kNone) {
        CHECK(differing > 0);  // (in fp16 the answer's rounding hides most of the float sums' differences)
      }
    }
  }
}

TEST_CASE("All-reduce: in a group derived for a broadcast, every member ends with the broadcaster's values exactly",
          "[net][avg]") {
  // The cross-bucket stage's hand-on (avg::Averager::broadcast): the group of a round just averaged, less
  // its aux member, derived the same on every member; only the carrier weighs, and the round is summed in
  // a fixed order, so its values come through as they are (no rounding, no zero losing its sign), whatever
  // the others held. The receivers start first and wait for the carrier, still averaging elsewhere.
  zmq::context_t context;
  std::vector<std::unique_ptr<Peer>> peers;
  for (size_t i = 0; i < 4; ++i) peers.push_back(std::make_unique<Peer>(context, &quiet()));
  Setup setup{{AvgRole::kNode, AvgRole::kClient, AvgRole::kAux, AvgRole::kNode}, {}, {3000, 0, 5000, 2001}, 1000};
  const Group round = make_group(peers, setup);
  auto derived = round.derived("across");
  REQUIRE(derived.is_ok());
  const auto again = round.derived("across");
  REQUIRE(again.is_ok());
  CHECK(derived->id() == again->id());  // every member derives the same group ...
  CHECK(derived->id() != round.id());   // ... a round of its own
  CHECK(derived->size() == 3);          // the aux member is not in it
  CHECK(derived->parts_of(1).empty());  // the client still reduces nothing; the two nodes split the vector
  CHECK(derived->begin().counts[0] + derived->begin().counts[2] == round.length());
  const size_t length = static_cast<size_t>(round.length());
  auto vectors = random_vectors(3, length, 41);
  for (size_t k = 0; k < length; k += 7) vectors[2][k] = -0.0f;  // the carrier's (member 2 of the derived group)
  const auto carried = vectors[2];
  for (Codec codec : {Codec::kNone, Codec::kFloat16}) {
    INFO("codec " << codec_name(codec));
    auto values = vectors;
    if (codec == Codec::kFloat16) {  // the carrier's values as an fp16 round left them
      std::vector<std::uint8_t> bytes(encoded_bytes(codec, length));
      encode(codec, values[2], bytes);
      REQUIRE(decode(codec, bytes, values[2]).is_ok());
    }
    const auto expected = values[2];
    auto group = codec == Codec::kNone ? *derived : *round.derived("across." + std::string(codec_name(codec)));
    std::vector<std::future<Result<AllReduceResult>>> futures;
    const std::vector<size_t> member_of{0, 1, 3};  // derived member -> peer
    for (size_t i = 0; i < 3; ++i) {
      const bool carrier = i == 2;
      if (carrier) std::this_thread::sleep_for(300ms);
      futures.push_back(std::async(std::launch::async, [&, i, carrier] {
        AllReduceOptions options{.codec = codec, .order_key = 0};
        if (!carrier) {
          options.senders_start_within = 10s;
          options.reducer_timeout = 10s;
        }
        return peers[member_of[i]]->all_reduce->run(group, values[i], carrier ? 3.0 : 0.0, options, Deadline::after(20s));
      }));
    }
    for (size_t i = 0; i < 3; ++i) {
      auto result = futures[i].get();
      INFO("member " << i);
      REQUIRE(result.is_ok());
      CHECK(result->averaged_fraction == 1.0);
      CHECK(result->weight == 3.0);  // what the carrier told them
      CHECK(std::memcmp(values[i].data(), expected.data(), length * sizeof(float)) == 0);
    }
  }
  CHECK(std::signbit(carried[0]));
}

TEST_CASE("All-reduce: parts for a round expected here are held until it starts, not refused and retried",
          "[net][avg]") {
  zmq::context_t context;
  std::vector<std::unique_ptr<Peer>> peers;
  for (size_t i = 0; i < 3; ++i) peers.push_back(std::make_unique<Peer>(context, &quiet()));
  // Member 2 found the group ahead of time and still computes: it starts its round 0.5 s after the others.
  Setup setup{{AvgRole::kNode, AvgRole::kNode, AvgRole::kNode}, {1, 2, 3}, {3000, 3000, 20000}, 1000};
  auto run_late = [&](bool expected_there, size_t window) {
    Group group = make_group(peers, setup);
    auto vectors = random_vectors(3, group.length(), 25);
    auto mean = weighted_mean(vectors, setup.weights, {0, 1, 2});
    peers[1]->all_reduce->expect(group);  // it may start a moment after member 0
    if (expected_there) peers[2]->all_reduce->expect(group);
    std::atomic<size_t> progress{0};  // member 0's sends (retries included) and reducer completions
    AllReduceOptions counted{.window = window, .on_progress = [&] { ++progress; }};
    auto early = std::async(std::launch::async, [&] {
      return peers[0]->all_reduce->run(group, vectors[0], setup.weights[0], counted, Deadline::after(60s));
    });
    auto early_too = std::async(std::launch::async, [&] {
      return peers[1]->all_reduce->run(group, vectors[1], setup.weights[1], AllReduceOptions{.window = window},
                                       Deadline::after(60s));
    });
    std::this_thread::sleep_for(500ms);
    auto late = peers[2]->all_reduce->run(group, vectors[2], setup.weights[2], AllReduceOptions{}, Deadline::after(60s));
    std::vector<Result<AllReduceResult>> results;
    results.push_back(early.get());
    results.push_back(early_too.get());
    results.push_back(std::move(late));
    for (size_t i = 0; i < 3; ++i) {
      INFO("member " << i);
      REQUIRE(results[i].is_ok());
      CHECK(results[i]->averaged_fraction == 1.0);
      CHECK(relative_error(vectors[i], mean) <= 1e-6);
    }
    return progress.load();
  };
  // Member 0 sends 3 parts to member 1 and 20 to member 2, and completes its own 3.
  const size_t exact = 3 + 20 + 3;
  SECTION("expected: every part is sent once") { CHECK(run_late(true, 2) == exact); }
  SECTION("not expected: the early parts are refused and resent every few milliseconds") {
    // Two parts resent every 2 ms for 0.5 s: about 490 on an idle machine; fewer on a loaded one.
    CHECK(run_late(false, 2) > exact + 20);
  }
  SECTION("expected, but more parts at once than the hold keeps: the rest are refused, resent, and all averaged") {
    CHECK(run_late(true, 20) > exact);
  }
}

TEST_CASE("All-reduce: a member adding no weight that starts before the senders waits for their first part",
          "[net][avg]") {
  zmq::context_t context;
  std::vector<std::unique_ptr<Peer>> peers;
  for (size_t i = 0; i < 3; ++i) peers.push_back(std::make_unique<Peer>(context, &quiet()));
  // Member 2 is an aux peer that reduces most of the vector. It joined a group the trainers (0 and 1) found
  // ahead, and runs the round at once, with the short deadline it learned from earlier rounds, while the
  // trainers compute for another 0.8 s.
  Setup setup{{AvgRole::kNode, AvgRole::kNode, AvgRole::kAux}, {1, 3, 0}, {1000, 1000, 8000}, 500};
  const auto learned = 400ms;
  auto run_with_aux_early = [&](AllReduceOptions aux_options) {
    Group group = make_group(peers, setup);
    auto vectors = random_vectors(3, group.length(), 27);
    auto aux = std::async(std::launch::async, [&] {
      return peers[2]->all_reduce->run(group, {}, 0, aux_options, Deadline::after(learned));
    });
    peers[0]->all_reduce->expect(group);
    peers[1]->all_reduce->expect(group);
    std::this_thread::sleep_for(800ms);
    auto senders = run_all(peers, group, vectors, setup, AllReduceOptions{.reducer_timeout = 5s}, {true, true, false});
    senders.push_back(aux.get());
    return std::make_pair(std::move(senders), vectors);
  };
  SECTION("its clocks start with the first part: everything is averaged") {
    auto [results, vectors] = run_with_aux_early(AllReduceOptions{.sender_timeout = 200ms, .senders_start_within = 10s});
    const auto mean = weighted_mean(random_vectors(3, vectors[0].size(), 27), setup.weights, {0, 1});
    for (size_t i = 0; i < 3; ++i) REQUIRE(results[i].is_ok());
    for (size_t i = 0; i < 2; ++i) {
      INFO("member " << i);
      CHECK(results[i]->averaged_fraction == 1.0);
      CHECK(relative_error(vectors[i], mean) <= 1e-6);
    }
    CHECK(results[2]->banned_senders.empty());
    CHECK(results[2]->unheard_senders.empty());
    CHECK(results[2]->waited_for_senders >= 700ms);
  }
  SECTION("without it, the aux member's round is over before the senders come, and its share is lost") {
    auto [results, vectors] = run_with_aux_early(AllReduceOptions{.sender_timeout = 200ms});
    for (size_t i = 0; i < 3; ++i) REQUIRE(results[i].is_ok());
    CHECK(results[2]->banned_senders.size() == 2);
    CHECK(results[2]->unheard_senders.size() == 2);  // they came after the round was over here
    CHECK(results[2]->waited_for_senders == Duration::zero());
    for (size_t i = 0; i < 2; ++i) CHECK(results[i]->averaged_fraction == Approx(0.2));
  }
  SECTION("senders that never come are waited for senders_start_within, no longer") {
    Group group = make_group(peers, setup);
    const auto started = std::chrono::steady_clock::now();
    auto result = peers[2]->all_reduce->run(group, {}, 0, AllReduceOptions{.sender_timeout = 100ms, .senders_start_within = 600ms},
                                            Deadline::after(learned));
    const auto took = std::chrono::steady_clock::now() - started;
    REQUIRE(result.is_ok());
    CHECK(result->banned_senders.size() == 2);
    CHECK(took >= 600ms);
    CHECK(took < 600ms + 1s);
  }
}

TEST_CASE("Centered clip: a member sending its gradient scaled by 1e6 moves the honest members' common result "
          "by at most tau/3",
          "[net][avg]") {
  // Robust aggregation: four members average; member 3 is poisoned (its honest vector times 1e6). Honest
  // vectors are one gradient plus small per-peer noise, so no honest contribution is clipped (per part they
  // lie ≈ 0.3 apart, tau is 1). Without the clip the plain mean is ruined. With it, the honest members end
  // with one and the same vector, each part of it the CenteredClip average of the four contributions that
  // reducer received, within tau · W_bad / W_honest = tau/3 of the honest members' mean (avg/centered_clip.hpp; the
  // unit test checks the same bound on the function alone). An honest member's own vector lies ≈ 0.3 from
  // that mean too, so the bound alone would pass if members kept their values: the equal results and the
  // clipped averages are what show the reducers averaged.
  zmq::context_t context;
  std::vector<std::unique_ptr<Peer>> peers;
  for (size_t i = 0; i < 4; ++i) peers.push_back(std::make_unique<Peer>(context, &quiet()));
  Setup setup{{AvgRole::kNode, AvgRole::kNode, AvgRole::kNode, AvgRole::kNode}, {1, 1, 1, 1}, {3000, 3000, 3000, 3000}, 1000};
  const CenteredClipOptions clip{.tau = 1.0, .iterations = 10};
  auto honest_vectors = [&](size_t length) {
    auto noise = random_vectors(4, length, 21);  // N(0, 3) each
    auto gradient = random_vectors(1, length, 22)[0];
    for (auto& v : noise) {
      for (size_t k = 0; k < length; ++k) v[k] = gradient[k] + v[k] / 300.0f;  // ≈ 0.01 of noise per value
    }
    return noise;
  };
  // The distance between `a` and `b` on elements [begin, end).
  auto part_distance = [](const auto& a, const auto& b, size_t begin, size_t end) {
    double squared = 0;
    for (size_t k = begin; k < end; ++k) squared += (a[k] - b[k]) * (a[k] - b[k]);
    return std::sqrt(squared);
  };

  for (bool clipped : {false, true}) {
    Group group = make_group(peers, setup);
    auto vectors = honest_vectors(group.length());
    const auto honest_mean = weighted_mean(vectors, setup.weights, {0, 1, 2});
    for (auto& x : vectors[3]) x *= 1e6f;
    const auto inputs = vectors;
    AllReduceOptions options;
    if (clipped) options.centered_clip = clip;
    auto results = run_all(peers, group, vectors, setup, options);
    for (size_t i = 0; i < 3; ++i) {
      INFO((clipped ? "with" : "without") << " centered clip, member " << i);
      REQUIRE(results[i].is_ok());
      CHECK(results[i]->averaged_fraction == 1.0);
    }
    std::vector<float> points, expected(group.length()), scratch;
    for (size_t begin = 0; begin < group.length(); begin += setup.part_elements) {
      const size_t end = std::min(group.length(), begin + setup.part_elements);
      INFO((clipped ? "with" : "without") << " centered clip, the part at " << begin);
      const double moved = part_distance(vectors[0], honest_mean, begin, end);
      if (!clipped) {
        CHECK(moved > 1e4 * clip.tau);  // the damage: the mean follows the poisoned member
        continue;
      }
      for (size_t i = 1; i < 3; ++i) CHECK(part_distance(vectors[i], vectors[0], begin, end) < 1e-4);
      CHECK(moved <= clip.tau / 3 + 1e-3);
      // What the part's reducer computes from the four contributions it received.
      points.clear();
      for (const auto& input : inputs) points.insert(points.end(), input.begin() + begin, input.begin() + end);
      centered_clip(points, end - begin, setup.weights, clip, std::span<float>(expected).subspan(begin, end - begin),
                    scratch);
      CHECK(part_distance(vectors[0], expected, begin, end) < 1e-3);
      CHECK(part_distance(vectors[0], inputs[0], begin, end) > 1e-2);  // and not member 0's own values
    }
  }
}
