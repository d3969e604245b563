// The training state's pure pieces (avg/training_state.hpp, the donor ranking and record schema of
// avg/state_transfer.hpp): the schema hash is pinned and sensitive to exactly names, shapes and order; states
// that could not travel are refused when built; donors are ranked newest, then least loaded, then by priority.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <set>

#include "dedloc/avg/state_transfer.hpp"
#include "dedloc/avg/training_state.hpp"
#include "dedloc/wire/map_codec.hpp"

using namespace dedloc;
using namespace dedloc::avg;
using Catch::Matchers::Contains;

TEST_CASE("Schema hash: pinned bytes, and a function of names, shapes and order only", "[unit][avg][state]") {
  std::vector<TensorSpec> specs{{"embed.weight", {30000, 128}}, {"ln.bias", {128}}, {"step", {}}};
  // BLAKE2b-256 of "dedloc-schema-v1", 3, then (12, "embed.weight", 2, 30000, 128), (7, "ln.bias", 1, 128),
  // (4, "step", 0), every number a little-endian u64. Peers of every build must agree on these bytes.
  CHECK(to_hex(schema_hash(specs)) == "7f0fb6a9d4213003e78774a2be0b5918d6ec6a5745dfd11542d1502b06813de7");
  CHECK(schema_hash(specs).size() == wire::kSchemaHashBytes);

  auto changed = [&](auto edit) {
    auto copy = specs;
    edit(copy);
    return schema_hash(copy);
  };
  const Bytes base = schema_hash(specs);
  CHECK(changed([](auto& s) { s[1].name = "ln.weight"; }) != base);
  CHECK(changed([](auto& s) { s[0].shape = {128, 30000}; }) != base);
  CHECK(changed([](auto& s) { s[2].shape = {1}; }) != base);  // a scalar is not a 1-vector
  CHECK(changed([](auto& s) { std::swap(s[0], s[1]); }) != base);
  CHECK(changed([](auto& s) { s.pop_back(); }) != base);
  // Lengths are prefixed: moving bytes between a name and the next cannot collide.
  CHECK(schema_hash(std::vector<TensorSpec>{{"ab", {1}}, {"c", {1}}}) !=
        schema_hash(std::vector<TensorSpec>{{"a", {1}}, {"bc", {1}}}));

  // Data, epoch and metadata are not part of it.
  auto a = TrainingState::with_tensors(specs, {3, {{"lr", 0.1}}});
  auto b = TrainingState::with_tensors(specs, {9, {}});
  REQUIRE(a.is_ok());
  REQUIRE(b.is_ok());
  b->flat()[5] = 1.0f;
  CHECK(a->schema_hash() == base);
  CHECK(b->schema_hash() == base);
}

TEST_CASE("A training state keeps its tensors back to back, in order", "[unit][avg][state]") {
  TrainingState state;
  state.metadata.epoch = 4;
  state.metadata.entries["optimizer"] = std::string("lamb");
  std::vector<float> w{1, 2, 3, 4, 5, 6}, b{7, 8}, s{9};
  REQUIRE(state.add_tensor("w", {2, 3}, w).is_ok());
  REQUIRE(state.add_tensor("b", {2}, b).is_ok());
  REQUIRE(state.add_tensor("s", {}, s).is_ok());
  REQUIRE(state.add_tensor("empty", {3, 0}, {}).is_ok());
  CHECK(state.size() == 4);
  CHECK(state.total_elements() == 9);
  CHECK(std::vector<float>(state.flat().begin(), state.flat().end()) == std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9});
  REQUIRE(state.find("b").has_value());
  CHECK(state.tensor(*state.find("b"))[1] == 8);
  CHECK(state.tensor(3).empty());
  CHECK_FALSE(state.find("x").has_value());
  CHECK(state.schema_hash() == schema_hash(state.tensors()));

  // Refusals leave the state as it was.
  const Bytes before = state.schema_hash();
  CHECK_THAT(state.add_tensor("v", {4}, b).message(), Contains("2 values for a shape of 4"));
  CHECK(state.add_tensor("w", {1}, s).code() == Code::kInvalidArgument);  // a name twice
  CHECK(state.add_tensor("", {1}, s).code() == Code::kInvalidArgument);
  CHECK(state.add_tensor("deep", std::vector<std::uint64_t>(wire::kMaxTensorRank + 1, 1), s).code() ==
        Code::kInvalidArgument);
  CHECK(state.size() == 4);
  CHECK(state.total_elements() == 9);
  CHECK(state.schema_hash() == before);
}

TEST_CASE("States that could not travel are refused when built", "[unit][avg][state]") {
  CHECK(TrainingState::with_tensors({{"a", {2}}, {"a", {3}}}).status().code() == Code::kInvalidArgument);
  CHECK(TrainingState::with_tensors({{"huge", {std::uint64_t{1} << 40, std::uint64_t{1} << 20}}}).status().code() ==
        Code::kInvalidArgument);
  CHECK(TrainingState::with_tensors({{std::string(wire::kMaxTensorNameBytes + 1, 'n'), {1}}}).status().code() ==
        Code::kInvalidArgument);
  StateMetadata metadata;
  metadata.entries["note"] = std::string(wire::kMaxStateEntryStringBytes + 1, 'x');
  CHECK(TrainingState::with_tensors({{"a", {1}}}, metadata).status().code() == Code::kInvalidArgument);
  metadata.entries.clear();
  metadata.entries[""] = 1.0;
  CHECK(TrainingState::with_tensors({{"a", {1}}}, metadata).status().code() == Code::kInvalidArgument);
  auto zeros = TrainingState::with_tensors({{"a", {3, 5}}, {"b", {7}}}, {12, {{"lr", 0.5}}});
  REQUIRE(zeros.is_ok());
  CHECK(zeros->total_elements() == 22);
  CHECK(zeros->epoch() == 12);
  CHECK(zeros->tensor(1).size() == 7);
}

namespace {

DonorInfo donor(const std::string& port, std::uint64_t epoch, std::uint64_t load, std::uint64_t max, double priority) {
  DonorInfo d;
  d.address.endpoint = "tcp://127.0.0.1:" + port;
  d.epoch = epoch;
  d.downloads = load;
  d.max_downloads = max;
  d.priority = priority;
  return d;
}

std::vector<std::string> ports(const std::vector<DonorInfo>& donors) {
  std::vector<std::string> out;
  for (const auto& d : donors) out.push_back(d.address.endpoint.substr(16));
  return out;
}

}  // namespace

TEST_CASE("Donors are ranked by epoch, then load, then priority, equals in random order", "[unit][avg][state]") {
  std::mt19937_64 rng(1);
  std::vector<DonorInfo> donors{donor("1", 5, 0, 4, 0), donor("2", 7, 3, 4, 0), donor("3", 7, 1, 4, 0),
                                donor("4", 7, 1, 4, 1), donor("5", 6, 0, 4, 9), donor("6", 7, 2, 8, 0)};
  // Epochs 7 and 6 rank alike: the idle 5 first; then loads 1/4 (4 before 3: its priority), 2/8 = 1/4 (6
  // ties with 3), 3/4; epoch 5 last.
  auto ranked = ports(rank_donors(donors, rng));
  CHECK(ranked[0] == "5");
  CHECK(ranked[1] == "4");
  CHECK(((ranked[2] == "3" && ranked[3] == "6") || (ranked[2] == "6" && ranked[3] == "3")));
  CHECK(ranked[4] == "2");
  CHECK(ranked[5] == "1");

  // Right after a step: one donor advertises the new epoch and has just refreshed its advert, the others
  // still the last one. A wave of joiners does not all pick it.
  std::vector<DonorInfo> wave;
  for (int i = 1; i <= 8; ++i) {
    wave.push_back(donor(std::to_string(i), i == 1 ? 12 : 11, 0, 4, 0));
    wave.back().refreshed = i == 1 ? 1000 : 995;
    wave.back().expiration = wave.back().refreshed + 30;
  }
  std::map<std::string, int> picked;
  for (int i = 0; i < 160; ++i) ++picked[ports(rank_donors(wave, rng))[0]];
  CHECK(picked.size() == 8);
  CHECK(picked["1"] < 60);

  // A donor behind NAT (reached through a relay) comes after the direct ones at the same epoch, idle or not.
  std::vector<DonorInfo> mixed{donor("1", 11, 3, 4, 0), donor("2", 11, 0, 4, 0)};
  mixed[1].address.endpoint = "relay://127.0.0.1:7001/p/" + std::string(40, 'a');
  auto order = rank_donors(mixed, rng);
  CHECK(order[0].address.endpoint == mixed[0].address.endpoint);

  // Equally good donors come first about equally often: joiners spread over them.
  std::vector<DonorInfo> equal{donor("1", 3, 0, 4, 0), donor("2", 3, 0, 4, 0), donor("3", 3, 0, 4, 0)};
  std::map<std::string, int> first;
  for (int i = 0; i < 300; ++i) ++first[ports(rank_donors(equal, rng))[0]];
  for (const auto& port : {"1", "2", "3"}) CHECK(first[port] > 60);

  // Trainers advertise their upload as their priority: among idle donors the fastest serve first, a busy
  // fast one after the idle slow ones (a wave of joiners still spreads).
  CHECK(donor_priority(50e6 / 8) == Approx(50.0));
  CHECK(donor_priority(0) == 0);
  CHECK(donor_priority(std::nan("")) == 0);
  std::vector<DonorInfo> rates{donor("1", 3, 0, 4, donor_priority(12.5e6 / 8)), donor("2", 3, 0, 4, donor_priority(50e6 / 8)),
                               donor("3", 3, 0, 4, donor_priority(25e6 / 8)), donor("4", 3, 1, 4, donor_priority(250e6 / 8))};
  CHECK(ports(rank_donors(rates, rng)) == std::vector<std::string>{"2", "3", "1", "4"});

  // Donors the downloader disfavours (a trainer: those whose parameters left the swarm's) come after the
  // others at their epoch, idle and fast as they may be, but before older epochs: what the downloader
  // knows of them may be a step old, so they are still asked.
  std::vector<DonorInfo> apart{donor("1", 3, 0, 4, 100), donor("2", 3, 2, 4, 0), donor("3", 3, 0, 4, 50),
                               donor("4", 1, 0, 4, 0)};
  apart[0].address.peer_id = crypto::PeerId::parse(std::string(40, '1'));
  apart[2].address.peer_id = crypto::PeerId::parse(std::string(40, '3'));
  CHECK(ports(rank_donors(apart, rng, {*apart[0].address.peer_id})) == std::vector<std::string>{"3", "2", "1", "4"});
  CHECK(ports(rank_donors(apart, rng, {*apart[0].address.peer_id, *apart[2].address.peer_id})) ==
        std::vector<std::string>{"2", "1", "3", "4"});
  CHECK(ports(rank_donors(apart, rng)) == std::vector<std::string>{"1", "3", "2", "4"});
}

TEST_CASE("Donor records are checked against their schema", "[unit][avg][state]") {
  dht::RecordValidator validator;
  add_donor_schema(validator);
  auto entry = [](const std::function<void(wire::MapWriter&)>& fill) {
    wire::MapWriter value;
    fill(value);
    dht::RecordEntry e;
    std::string subkey = "tcp://127.0.0.1:7000";
    e.subkey = Bytes(subkey.begin(), subkey.end());
    e.value = value.to_bytes();
    e.expiration = 1.7e9 + 60;
    return e;
  };
  const double now = 1.7e9;
  auto good = entry([](auto& v) {
    v.put("ep", "tcp://127.0.0.1:7000").put("epoch", std::uint64_t{3}).put("load", std::uint64_t{1}).put("max", std::uint64_t{4}).put("prio", 0.5);
  });
  CHECK(validator.validate("run1_donors", good, now).is_ok());
  auto negative = entry([](auto& v) { v.put("ep", "tcp://127.0.0.1:7000").put("epoch", std::int64_t{-1}); });
  CHECK(validator.validate("run1_donors", negative, now).code() == Code::kMalformed);
  auto no_endpoint = entry([](auto& v) { v.put("epoch", std::uint64_t{3}); });
  CHECK(validator.validate("run1_donors", no_endpoint, now).code() == Code::kMalformed);
  auto refreshed = entry([&](auto& v) { v.put("ep", "tcp://127.0.0.1:7000").put("epoch", std::uint64_t{3}).put("t", now); });
  CHECK(validator.validate("run1_donors", refreshed, now).is_ok());
  auto negative_time = entry([](auto& v) { v.put("ep", "tcp://127.0.0.1:7000").put("epoch", std::uint64_t{3}).put("t", -1.0); });
  CHECK(validator.validate("run1_donors", negative_time, now).code() == Code::kMalformed);
  CHECK(wire::decode_donor(negative_time.value).status().code() == Code::kMalformed);
  CHECK(donors_key("run1") == "run1_donors");
}

TEST_CASE("Adverts that missed refreshes rank after every fresh one, whatever their epoch", "[unit][avg][state]") {
  // TTL 30 s, refreshed every 10 s by a live owner; the newest refresh in the list is at t = 1000.
  auto advert = [](const std::string& port, std::uint64_t epoch, double refreshed) {
    DonorInfo d = donor(port, epoch, 0, 4, 0);
    d.refreshed = refreshed;
    d.expiration = refreshed + 30;
    return d;
  };
  // Gone 20 s ago, at the newest epoch: more than half its TTL without a refresh.
  CHECK(stale_advert(advert("1", 9, 980), 1000));
  CHECK_FALSE(stale_advert(advert("2", 8, 995), 1000));
  CHECK_FALSE(stale_advert(advert("2", 8, 1000), 1000));
  // Without a refresh time (a hand-made list, or an older peer's record): never stale.
  CHECK_FALSE(stale_advert(donor("3", 9, 0, 4, 0), 1000));
  DonorInfo old_peer = donor("4", 9, 0, 4, 0);
  old_peer.expiration = 900;
  CHECK_FALSE(stale_advert(old_peer, 1000));

  std::mt19937_64 rng(3);
  std::vector<DonorInfo> donors{advert("1", 9, 980), advert("2", 8, 995), advert("3", 8, 1000),
                                advert("4", 7, 999), advert("5", 9, 960)};
  auto ranked = ports(rank_donors(donors, rng));
  // The fresh ones first (epochs 8 and 7 alike), then the stale ones, whatever their epoch.
  CHECK(std::set<std::string>(ranked.begin(), ranked.begin() + 3) == std::set<std::string>{"2", "3", "4"});
  CHECK(std::set<std::string>(ranked.begin() + 3, ranked.end()) == std::set<std::string>{"1", "5"});

  // A NaN priority (anyone can list anything) neither crashes the ranking nor loses a donor.
  std::vector<DonorInfo> odd{donor("1", 3, 0, 4, std::nan("")), donor("2", 3, 0, 4, 1), donor("3", 3, 0, 4, 0)};
  CHECK(rank_donors(odd, rng).size() == 3);
}
