// libFuzzer target: DHT record values and entries from other peers (any peer can store them), and what is
// built from them: progress and metrics records (collab/progress.hpp), the record validator with every
// family's schema (dht/validator.hpp, record_schema.hpp) and owner signatures (dht/record.hpp), relay
// listings (relay/relay_directory.hpp), donor records (avg/state_transfer.hpp), the averaged vector's
// schema record (avg/averager.hpp), round result listings (avg/round_result.hpp), all encoded by the record
// catalogue (wire/records.hpp), and the monitor's picture of a swarm (monitor/swarm_view.hpp, exposition.hpp).
//
// Input: a selector byte, then (fuzz_target.hpp's Input: "prefixed" is a length byte and that many bytes)
//   0  progress value (the rest)     decode_progress; accepted: re-encodes to the same record, which the
//                                    "_progress" schema accepts
//   1  metrics value (the rest)      decode_metrics; the same with "_metrics"
//   2  flags, subkey (prefixed), value (the rest)   parse_relay_listing; accepted: its address names the
//                                    owner, and the listing re-encoded parses the same
//   3  subkey (prefixed), value (the rest)          parse_donor; accepted: re-encoded parses the same
//   4  a value (the rest)            decode_vector_schema and decode_round_result; accepted: re-encodes to
//                                    the same
//   5  a whole entry: flags, key name (prefixed), subkey (prefixed), expiration, signature (prefixed), value
//      (the rest), validated as a store would be; flags can make the key a record family, put the fixed
//      identity's owner marker in the subkey and sign the entry with it (fixtures.hpp), so that the
//      fuzzer reaches the schemas behind the signature check; what sign_entry signed verifies
//   6  a count, then per record: kind byte, subkey (prefixed), value (prefixed); the decodable ones go
//      into summarize_swarm, whose picture must be consistent (modes among the known words, bytes per sample
//      finite and only for peers that computed) and whose JSON must parse
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dedloc/avg/state_transfer.hpp"
#include "dedloc/dht/record.hpp"
#include "dedloc/dht/record_schema.hpp"
#include "dedloc/dht/validator.hpp"
#include "dedloc/monitor/exposition.hpp"
#include "dedloc/monitor/history.hpp"
#include "dedloc/monitor/swarm_view.hpp"
#include "dedloc/relay/relay_directory.hpp"
#include "dedloc/collab/progress.hpp"
#include "dedloc/wire/records.hpp"
#include "fuzz/fixtures.hpp"
#include "fuzz/fuzz_target.hpp"

namespace {

using namespace dedloc;

const dht::RecordValidator& validator() {
  static const dht::RecordValidator v = [] {
    dht::RecordValidator out;
    dht::add_run_record_schemas(out);
    return out;
  }();
  return v;
}

Bytes to_bytes(ByteSpan s) { return Bytes(s.begin(), s.end()); }

std::string owner_subkey() { return dht::owner_marker(fuzz::identity().public_key()); }

// An unowned entry of `value`, fresh at kRecordsNow, as a store gets it.
wire::RecordEntry entry_of(Bytes value, std::optional<Bytes> subkey = std::nullopt) {
  return wire::RecordEntry{std::move(subkey), std::move(value), fuzz::kRecordsNow + 60, {}};
}

// The same as a DHT get returns it.
dht::FoundEntry found(Bytes value, std::optional<Bytes> subkey) {
  return dht::FoundEntry{std::move(subkey), std::move(value), fuzz::kRecordsNow + 60};
}

void progress(ByteSpan value) {
  auto p = collab::decode_progress(value);
  if (!p) return;
  Bytes encoded = collab::encode_progress(*p);
  auto again = collab::decode_progress(encoded);
  DEDLOC_FUZZ_CHECK(again.is_ok() && *again == *p);
  DEDLOC_FUZZ_CHECK(validator().validate("run_progress", entry_of(encoded), fuzz::kRecordsNow).is_ok());
}

void metrics(ByteSpan value) {
  auto m = collab::decode_metrics(value);
  if (!m) return;
  Bytes encoded = collab::encode_metrics(*m);
  auto again = collab::decode_metrics(encoded);
  DEDLOC_FUZZ_CHECK(again.is_ok() && *again == *m);
  DEDLOC_FUZZ_CHECK(validator().validate("run_metrics", entry_of(encoded), fuzz::kRecordsNow).is_ok());
}

void relay_listing(fuzz::Input& in) {
  const std::uint8_t flags = in.byte();
  Bytes subkey = to_bytes(in.prefixed());
  if (flags & 1) {
    std::string owner = owner_subkey();
    subkey.insert(subkey.begin(), owner.begin(), owner.end());
  }
  auto listing = relay::parse_relay_listing(found(to_bytes(in.rest()), subkey));
  if (!listing) return;
  auto owner = dht::find_owner(subkey);
  DEDLOC_FUZZ_CHECK(owner.is_ok() && owner->has_value() && listing->address.peer_id);
  DEDLOC_FUZZ_CHECK(*listing->address.peer_id ==
                    crypto::PeerId::from_public_key(ByteSpan((*owner)->data(), (*owner)->size())));
  Bytes value = wire::encode_relay_listing({listing->address.to_string(), listing->peers, listing->max_peers});
  auto again = relay::parse_relay_listing(found(value, subkey));
  DEDLOC_FUZZ_CHECK(again.is_ok() && again->address.to_string() == listing->address.to_string() &&
                    again->peers == listing->peers && again->max_peers == listing->max_peers);
}

void donor(fuzz::Input& in) {
  Bytes subkey = to_bytes(in.prefixed());
  auto d = avg::parse_donor(found(to_bytes(in.rest()), subkey));
  if (!d) return;
  DEDLOC_FUZZ_CHECK(!d->address.endpoint.empty() && d->expiration == fuzz::kRecordsNow + 60);
  DEDLOC_FUZZ_CHECK(std::isfinite(d->refreshed) && d->refreshed >= 0);
  Bytes value = wire::encode_donor({d->address.endpoint, d->epoch, d->downloads, d->max_downloads, d->priority,
                                    d->refreshed});
  auto again = avg::parse_donor(found(value, subkey));
  DEDLOC_FUZZ_CHECK(again.is_ok() && again->address.endpoint == d->address.endpoint &&
                    again->address.peer_id == d->address.peer_id && again->epoch == d->epoch &&
                    again->downloads == d->downloads && again->max_downloads == d->max_downloads &&
                    again->refreshed == d->refreshed);
  DEDLOC_FUZZ_CHECK(again->priority == d->priority || (std::isnan(again->priority) && std::isnan(d->priority)));
}

void vector_schema(ByteSpan value) {
  auto schema = wire::decode_vector_schema(value);
  if (!schema) return;
  auto again = wire::decode_vector_schema(wire::encode_vector_schema(*schema));
  DEDLOC_FUZZ_CHECK(again.is_ok() && again->hash == schema->hash && again->length == schema->length);
}

void round_result(ByteSpan value) {
  auto record = wire::decode_round_result(value);
  if (!record) return;
  DEDLOC_FUZZ_CHECK(record->schema_hash.size() == wire::kSchemaHashBytes && record->contributions > 0);
  auto again = wire::decode_round_result(wire::encode_round_result(*record));
  DEDLOC_FUZZ_CHECK(again.is_ok() && *again == *record);
}

void entry(fuzz::Input& in) {
  static const char* const kFamilies[] = {"", "_progress", "_metrics", "_donors", "_relays", "_grad_schema", "_held"};
  const std::uint8_t flags = in.byte();
  ByteSpan key_bytes = in.prefixed();
  std::string key(key_bytes.begin(), key_bytes.end());
  key += kFamilies[(flags >> 3) % 7];
  wire::RecordEntry e;
  if (flags & 1) {
    Bytes subkey = to_bytes(in.prefixed());
    if (flags & 2) {
      std::string owner = owner_subkey();
      subkey.insert(subkey.begin(), owner.begin(), owner.end());
    }
    e.subkey = std::move(subkey);
  }
  e.expiration = (flags & 4) ? fuzz::kRecordsNow + in.u16() : in.f64();
  ByteSpan signature = in.prefixed();
  e.value = to_bytes(in.rest());
  bool signed_by_us = false;
  if (flags & 0x80) {
    signed_by_us = dht::sign_entry(fuzz::identity(), key, e).is_ok() && !e.signature.empty();
  } else {
    e.signature = to_bytes(signature);
  }
  (void)dht::entry_owner(key, e.subkey);
  Status checked = dht::check_owner_signature(key, e);
  if (signed_by_us) DEDLOC_FUZZ_CHECK(checked.is_ok());
  Status valid = validator().validate(key, e, fuzz::kRecordsNow);
  if (valid.is_ok()) {
    DEDLOC_FUZZ_CHECK(checked.is_ok() && std::isfinite(e.expiration));
    // A record a family's schema accepted decodes as that family (or is a withdrawal).
    if (!e.value.empty() && key.ends_with("_progress")) (void)collab::decode_progress(e.value);
    if (!e.value.empty() && key.ends_with("_metrics")) (void)collab::decode_metrics(e.value);
    if (key.ends_with("_relays")) (void)relay::parse_relay_listing(dht::FoundEntry{e.subkey, e.value, e.expiration});
    if (key.ends_with("_donors")) (void)avg::parse_donor(dht::FoundEntry{e.subkey, e.value, e.expiration});
    if (!e.value.empty() && key.ends_with("_held")) DEDLOC_FUZZ_CHECK(wire::decode_round_result(e.value).is_ok());
  }
}

void swarm(fuzz::Input& in) {
  const size_t count = in.byte() % 16;
  std::vector<collab::PeerProgress> progress;
  std::vector<collab::PeerMetrics> metrics;
  std::set<std::string> subkeys;
  for (size_t i = 0; i < count && !in.empty(); ++i) {
    const std::uint8_t kind = in.byte();
    ByteSpan subkey_bytes = in.prefixed();
    std::string subkey(subkey_bytes.begin(), subkey_bytes.end());
    if (kind & 2) subkey = owner_subkey() + subkey;
    ByteSpan value = in.prefixed();
    if (kind & 1) {
      auto m = collab::decode_metrics(value);
      if (!m) continue;
      m->peer = subkey;
      metrics.push_back(std::move(*m));
    } else {
      auto p = collab::decode_progress(value);
      if (!p) continue;
      p->peer = subkey;
      progress.push_back(std::move(*p));
    }
    subkeys.insert(subkey);
  }
  const double now = fuzz::kRecordsNow;
  monitor::SwarmView view = monitor::summarize_swarm(progress, metrics, now);
  DEDLOC_FUZZ_CHECK(view.alive() == subkeys.size());
  DEDLOC_FUZZ_CHECK(view.trainers + view.clients + view.aux == view.alive());
  double contributions = 0;
  for (const auto& peer : view.peers) {
    DEDLOC_FUZZ_CHECK(peer.contribution >= 0 && peer.contribution <= 1 + 1e-9);
    DEDLOC_FUZZ_CHECK(peer.age_seconds >= 0);
    contributions += peer.contribution;
    DEDLOC_FUZZ_CHECK(peer.mode.empty() || peer.mode == "synchronous" || peer.mode == "diloco");
    DEDLOC_FUZZ_CHECK(peer.bytes_per_sample.has_value() == (peer.samples_computed > 0));
    if (peer.bytes_per_sample) DEDLOC_FUZZ_CHECK(std::isfinite(*peer.bytes_per_sample) && *peer.bytes_per_sample >= 0);
  }
  DEDLOC_FUZZ_CHECK(contributions <= 1 + 1e-6);
  DEDLOC_FUZZ_CHECK(view.mode.empty() || view.mode == "synchronous" || view.mode == "diloco" || view.mode == "mixed");
  if (view.inner_steps) DEDLOC_FUZZ_CHECK(*view.inner_steps >= 1);
  if (view.bytes_per_sample) DEDLOC_FUZZ_CHECK(std::isfinite(*view.bytes_per_sample) && *view.bytes_per_sample >= 0);
  monitor::MonitorCounters counters{3, 1, now};
  auto json = nlohmann::json::parse(monitor::state_json("run", view, counters), nullptr, false);
  DEDLOC_FUZZ_CHECK(!json.is_discarded() && json.is_object());
  DEDLOC_FUZZ_CHECK(!monitor::metrics_text("run", view, counters).empty());
  monitor::HistoryRow row = monitor::HistoryRow::of(view);
  DEDLOC_FUZZ_CHECK(row.peers == view.alive());
}

}  // namespace

DEDLOC_FUZZ_TARGET(records) {
  fuzz::Input in(data, size);
  switch (in.byte() % 7) {
    case 0: progress(in.rest()); break;
    case 1: metrics(in.rest()); break;
    case 2: relay_listing(in); break;
    case 3: donor(in); break;
    case 4: {
      const ByteSpan value = in.rest();
      vector_schema(value);
      round_result(value);
      break;
    }
    case 5: entry(in); break;
    default: swarm(in); break;
  }
  return 0;
}
