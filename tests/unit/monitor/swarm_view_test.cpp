// The monitor's picture of a run from hand-made progress and metrics records, and the metrics record's
// encoding and schema.
#include <catch2/catch.hpp>

#include "dedloc/crypto/identity.hpp"
#include "dedloc/dht/record.hpp"
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
}
