// The monitor's picture of a run from hand-made progress and metrics records, and the metrics record's
// encoding and schema.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "dedloc/crypto/identity.hpp"
#include "dedloc/dht/record.hpp"
#include "dedloc/monitor/exposition.hpp"
#include "dedloc/monitor/monitor.hpp"
#include "dedloc/monitor/swarm_view.hpp"
#include "dedloc/collab/progress.hpp"
#include "dedloc/wire/map_codec.hpp"

using namespace dedloc;
using namespace dedloc::monitor;

namespace {

struct Peer {
  crypto::Identity identity = crypto::Identity::generate();
  std::string subkey() const { return dht::owner_marker(identity.public_key()); }
  std::string id() const { return identity.peer_id().to_string(); }
};

collab::PeerProgress progress(const Peer& peer, std::uint64_t epoch, std::uint64_t samples, double sps, double t,
                             bool client = false) {
  collab::PeerProgress p;
  p.epoch = epoch;
  p.samples_accumulated = samples;
  p.samples_per_second = sps;
  p.time = t;
  p.client_mode = client;
  p.peer = peer.subkey();
  return p;
}

collab::PeerMetrics metrics(const Peer& peer, std::string role, std::uint64_t epoch, std::optional<double> loss,
                           double t, std::uint64_t batch = 0, std::uint64_t rounds = 0) {
  collab::PeerMetrics m;
  m.role = std::move(role);
  m.epoch = epoch;
  m.loss = loss;
  m.time = t;
  m.target_batch_size = batch;
  m.rounds = rounds;
  m.peer = peer.subkey();
  return m;
}

}  // namespace

TEST_CASE("The view joins each peer's progress and metrics records into one row, by role", "[unit][monitor]") {
  Peer fast, slow, client, aux;
  const double now = 1000;
  std::vector<collab::PeerProgress> p = {progress(fast, 7, 100, 300, now - 1), progress(slow, 7, 20, 100, now - 2),
                                        progress(client, 6, 0, 100, now - 1, true)};
  std::vector<collab::PeerMetrics> m = {metrics(fast, "trainer", 7, 2.0, now - 5, 1000, 6),
                                       metrics(slow, "trainer", 7, 3.0, now - 4, 1000, 6),
                                       metrics(client, "client", 6, std::nullopt, now - 3),
                                       metrics(aux, "aux", 7, std::nullopt, now - 10, 0, 4)};
  auto view = summarize_swarm(p, m, now);
  CHECK(view.epoch == 7);
  CHECK(view.alive() == 4);
  CHECK(view.trainers == 2);
  CHECK(view.clients == 1);
  CHECK(view.aux == 1);
  CHECK(view.samples_per_second == Approx(500));
  REQUIRE(view.mean_loss);
  CHECK(*view.mean_loss == Approx(2.5));  // the client has no loss yet: not counted as 0
  CHECK(view.target_batch_size == 1000);
  REQUIRE(view.eta_seconds);
  // S = (100 + 300·1) + (20 + 100·2) = 620 at epoch 7 (the client, at 6, does not count); R = 500.
  CHECK(view.samples_accumulated == Approx(620));
  CHECK(*view.eta_seconds == Approx((1000 - 620) / 500.0));

  REQUIRE(view.peers.size() == 4);
  CHECK(view.peers[0].peer_id == fast.id());  // trainers first, fastest first
  CHECK(view.peers[0].contribution == Approx(0.6));
  CHECK(view.peers[0].age_seconds == Approx(1));  // the freshest of its records
  CHECK(view.peers[0].rounds == 6);
  CHECK(view.peers[1].peer_id == slow.id());
  CHECK(view.peers[2].peer_id == client.id());
  CHECK(view.peers[2].role == "client");
  CHECK(view.peers[3].peer_id == aux.id());
  CHECK(view.peers[3].role == "aux");
  CHECK(view.peers[3].contribution == 0);
  CHECK(view.peers[3].rounds == 4);
}

namespace {

collab::PeerMetrics with_mode(collab::PeerMetrics m, std::string mode, std::uint64_t inner, std::uint64_t sent,
                              std::uint64_t computed) {
  m.mode = std::move(mode);
  m.inner_steps = inner;
  m.bytes_sent = sent;
  m.samples_computed = computed;
  return m;
}

}  // namespace

TEST_CASE("The view shows each peer's mode, inner steps and bytes per sample, and the swarm's", "[unit][monitor]") {
  Peer fast, slow, old, aux;
  const double now = 1000;
  std::vector<collab::PeerProgress> p = {progress(fast, 7, 0, 300, now), progress(slow, 7, 0, 100, now),
                                        progress(old, 7, 0, 50, now)};
  std::vector<collab::PeerMetrics> m = {
      with_mode(metrics(fast, "trainer", 7, 2.0, now), "diloco", 8, 3'000'000, 30'000),
      with_mode(metrics(slow, "trainer", 7, 2.0, now), "diloco", 3, 3'000'000, 10'000),
      metrics(old, "trainer", 7, 2.0, now),  // a trainer from before the mode fields: says none of them
      metrics(aux, "aux", 7, std::nullopt, now)};
  auto view = summarize_swarm(p, m, now);
  REQUIRE(view.peers.size() == 4);
  const auto& f = view.peers[0];
  CHECK(f.peer_id == fast.id());
  CHECK(f.mode == "diloco");
  CHECK(f.inner_steps == 8);
  CHECK(f.bytes_sent == 3'000'000);
  CHECK(f.samples_computed == 30'000);
  REQUIRE(f.bytes_per_sample);
  CHECK(*f.bytes_per_sample == Approx(100));
  REQUIRE(view.peers[1].bytes_per_sample);
  CHECK(*view.peers[1].bytes_per_sample == Approx(300));
  CHECK(view.peers[2].peer_id == old.id());
  CHECK(view.peers[2].mode.empty());
  CHECK_FALSE(view.peers[2].bytes_per_sample);  // nothing computed that it said: no made-up 0
  CHECK_FALSE(view.peers[3].bytes_per_sample);

  CHECK(view.mode == "diloco");  // the peer that did not say does not make it "mixed"
  REQUIRE(view.inner_steps);
  CHECK(*view.inner_steps == Approx(5.5));  // the mean of 8 and 3
  REQUIRE(view.bytes_per_sample);
  CHECK(*view.bytes_per_sample == Approx(6e6 / 4e4));  // Σ sent / Σ computed, not the mean of 100 and 300

  auto json = nlohmann::json::parse(state_json("r", view, MonitorCounters{}));
  CHECK(json["mode"] == "diloco");
  CHECK(json["inner_steps"].get<double>() == Approx(5.5));
  CHECK(json["bytes_per_sample"].get<double>() == Approx(150));
  CHECK(json["peers"][0]["mode"] == "diloco");
  CHECK(json["peers"][0]["inner_steps"] == 8);
  CHECK(json["peers"][0]["bytes_sent"] == 3'000'000);
  CHECK(json["peers"][0]["samples_computed"] == 30'000);
  CHECK(json["peers"][0]["bytes_per_sample"].get<double>() == Approx(100));
  CHECK(json["peers"][2]["mode"].is_null());
  CHECK(json["peers"][2]["bytes_per_sample"].is_null());
  CHECK_THAT(summary_line(view), Catch::EndsWith(", diloco, 5.5 inner steps per outer step, 150.0 bytes/sample"));

  // A synchronous peer among DiLoCo ones (it would be refused from their groups): "mixed".
  m.push_back(with_mode(metrics(Peer{}, "trainer", 7, 2.0, now), "synchronous", 0, 100, 10));
  auto mixed = summarize_swarm(p, m, now);
  CHECK(mixed.mode == "mixed");
  CHECK(*mixed.inner_steps == Approx(5.5));  // synchronous peers take no inner steps

  // Nobody says: no mode, no inner steps, no bytes per sample, and the summary line as before.
  auto silent = summarize_swarm(p, {metrics(old, "trainer", 7, 2.0, now)}, now);
  CHECK(silent.mode.empty());
  CHECK_FALSE(silent.inner_steps);
  CHECK_FALSE(silent.bytes_per_sample);
  auto silent_json = nlohmann::json::parse(state_json("r", silent, MonitorCounters{}));
  CHECK(silent_json["mode"].is_null());
  CHECK(silent_json["bytes_per_sample"].is_null());
  CHECK_THAT(summary_line(silent), Catch::EndsWith("samples/s, loss 2.0000"));
}

TEST_CASE("Without a target batch or any record the view promises no ETA", "[unit][monitor]") {
  Peer a;
  auto empty = summarize_swarm({}, {}, 5);
  CHECK(empty.alive() == 0);
  CHECK_FALSE(empty.eta_seconds);
  CHECK_FALSE(empty.mean_loss);
  auto no_batch = summarize_swarm({progress(a, 3, 10, 50, 4)}, {}, 5);
  CHECK(no_batch.alive() == 1);
  CHECK(no_batch.epoch == 3);
  CHECK_FALSE(no_batch.eta_seconds);
  // Metrics only (the progress record expired first): the epoch comes from them.
  auto metrics_only = summarize_swarm({}, {metrics(a, "trainer", 9, 1.0, 4)}, 5);
  CHECK(metrics_only.epoch == 9);
}

TEST_CASE("A subkey that names no owner is shown as bounded hex, never as raw bytes", "[unit][monitor]") {
  std::string hostile = "<script>\xff\xfe" + std::string(100, 'x');
  auto shown = peer_id_of_subkey(hostile);
  CHECK(shown.rfind("unowned:", 0) == 0);
  CHECK(shown.size() == 8 + 32);
  CHECK(shown.find('<') == std::string::npos);
}

TEST_CASE("Metrics records round-trip, the schema refuses wrong types and the decoder unknown roles",
          "[unit][monitor]") {
  collab::PeerMetrics m;
  m.epoch = 4;
  m.loss = 1.25;
  m.samples_per_second = 12;
  m.micro_steps = 3;
  m.role = "client";
  m.target_batch_size = 256;
  m.rounds = 2;
  m.time = 99;
  auto decoded = collab::decode_metrics(collab::encode_metrics(m));
  REQUIRE(decoded.is_ok());
  CHECK(*decoded == m);

  m.loss = std::nan("");  // a diverged peer: published without a loss, still listed
  decoded = collab::decode_metrics(collab::encode_metrics(m));
  REQUIRE(decoded.is_ok());
  CHECK_FALSE(decoded->loss);

  dht::RecordValidator validator;
  collab::add_metrics_schema(validator);
  auto check = [&](const Bytes& value) {
    return validator.validate(collab::metrics_key("run1"), wire::RecordEntry{Bytes{'s'}, value, 1.7e9 + 30, {}}, 1.7e9);
  };
  CHECK(check(collab::encode_metrics(m)).is_ok());
  wire::MapWriter old_peer;  // a record from before role/B/rounds: still valid
  old_peer.put("epoch", std::uint64_t{1}).put("loss", 0.5).put("sps", 3.0).put("steps", std::uint64_t{2}).put("t", 9.0);
  CHECK(check(old_peer.to_bytes()).is_ok());
  wire::MapWriter negative;
  negative.put("epoch", std::uint64_t{1}).put("sps", -3.0).put("steps", std::uint64_t{2}).put("t", 9.0);
  CHECK_FALSE(check(negative.to_bytes()).is_ok());
  wire::MapWriter bad_role;
  bad_role.put("epoch", std::uint64_t{1}).put("sps", 3.0).put("steps", std::uint64_t{2}).put("t", 9.0).put("role", "boss");
  CHECK(collab::decode_metrics(bad_role.to_bytes()).status().code() == Code::kMalformed);

  // The mode fields round-trip; older records without them decode as "not said" (above: old_peer).
  m.loss = 1.25;
  m.mode = "diloco";
  m.inner_steps = 16;
  m.bytes_sent = std::uint64_t{1} << 40;
  m.samples_computed = 3'000'000;
  decoded = collab::decode_metrics(collab::encode_metrics(m));
  REQUIRE(decoded.is_ok());
  CHECK(*decoded == m);
  CHECK(check(collab::encode_metrics(m)).is_ok());
  auto old = collab::decode_metrics(old_peer.to_bytes());
  REQUIRE(old.is_ok());
  CHECK(old->mode.empty());
  CHECK(old->inner_steps == 0);
  CHECK(old->bytes_sent == 0);
  CHECK(old->samples_computed == 0);
  auto with = [](auto&& put) {
    wire::MapWriter w;
    w.put("epoch", std::uint64_t{1}).put("sps", 3.0).put("steps", std::uint64_t{2}).put("t", 9.0);
    put(w);
    return w.to_bytes();
  };
  // A mode the decoder does not know, or an empty one, is refused; so are wrong types, by the schema too.
  for (const char* mode : {"async", "", "Diloco"}) {
    INFO(mode);
    CHECK(collab::decode_metrics(with([&](wire::MapWriter& w) { w.put("mode", mode); })).status().code() ==
          Code::kMalformed);
  }
  const Bytes number_mode = with([](wire::MapWriter& w) { w.put("mode", 1.0); });
  CHECK_FALSE(collab::decode_metrics(number_mode).is_ok());
  CHECK_FALSE(check(number_mode).is_ok());
  const Bytes negative_sent = with([](wire::MapWriter& w) { w.put("sent", std::int64_t{-5}); });
  CHECK_FALSE(collab::decode_metrics(negative_sent).is_ok());
  CHECK_FALSE(check(negative_sent).is_ok());
  const Bytes fractional_inner = with([](wire::MapWriter& w) { w.put("inner", 2.5); });
  CHECK_FALSE(collab::decode_metrics(fractional_inner).is_ok());
  CHECK_FALSE(check(fractional_inner).is_ok());
}
