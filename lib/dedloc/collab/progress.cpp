#include "dedloc/collab/progress.hpp"

#include "dedloc/dht/record.hpp"
#include "dedloc/dht/record_schema.hpp"

namespace dedloc::collab {

std::string gradient_round(std::uint64_t epoch) { return "grad." + std::to_string(epoch); }

Bytes own_subkey(const dht::Node& node) {
  std::string marker = dht::owner_marker(node.public_key());
  return Bytes(marker.begin(), marker.end());
}

void add_progress_schema(dht::RecordValidator& validator) {
  dht::add_record_schema(validator, wire::progress_schema());
}

Status publish_progress(dht::Node& node, const std::string& run_id, const PeerProgress& progress, Duration ttl,
                        Deadline deadline) {
  double expiration = progress.time + std::chrono::duration<double>(ttl).count();
  return node.store(progress_key(run_id), own_subkey(node), encode_progress(progress), expiration, deadline).status();
}

namespace {

// An empty value under our subkey that outlives the record it replaces.
Status withdraw(dht::Node& node, const std::string& key, Duration ttl, Deadline deadline) {
  double expiration = SystemClock::instance().unix_seconds() + std::chrono::duration<double>(ttl).count();
  return node.store(key, own_subkey(node), Bytes{}, expiration, deadline).status();
}

}  // namespace

Status withdraw_progress(dht::Node& node, const std::string& run_id, Duration ttl, Deadline deadline) {
  return withdraw(node, progress_key(run_id), ttl, deadline);
}

Status withdraw_metrics(dht::Node& node, const std::string& run_id, Duration ttl, Deadline deadline) {
  return withdraw(node, metrics_key(run_id), ttl, deadline);
}

void add_metrics_schema(dht::RecordValidator& validator) {
  dht::add_record_schema(validator, wire::metrics_schema());
}

Status publish_metrics(dht::Node& node, const std::string& run_id, PeerMetrics metrics, Duration ttl,
                       Deadline deadline) {
  metrics.time = SystemClock::instance().unix_seconds();
  return node.store(metrics_key(run_id), own_subkey(node), encode_metrics(metrics),
                    metrics.time + std::chrono::duration<double>(ttl).count(), deadline).status();
}

namespace {

// Every live, well-formed entry under `key` decoded by `decode`, with its owner subkey in `.peer`.
// Withdrawn entries (empty values) and malformed ones are skipped: the validator should have refused the
// latter, but never trust a replica.
template <class Record, class Decode>
Result<std::vector<Record>> read_owned_records(dht::Node& node, const std::string& key, Decode decode,
                                               Deadline deadline) {
  auto found = node.get(key, dht::GetMode::kLatest, deadline);
  if (!found) return found.status();
  std::vector<Record> records;
  if (!found->has_value()) return records;
  for (const auto& entry : (*found)->entries) {
    if (!entry.subkey || entry.value.empty()) continue;
    auto record = decode(entry.value);
    if (!record) continue;
    record->peer.assign(entry.subkey->begin(), entry.subkey->end());
    records.push_back(std::move(*record));
  }
  return records;
}

}  // namespace

Result<std::vector<PeerProgress>> read_progress(dht::Node& node, const std::string& run_id, Deadline deadline) {
  return read_owned_records<PeerProgress>(node, progress_key(run_id), decode_progress, deadline);
}

Result<std::vector<PeerMetrics>> read_metrics(dht::Node& node, const std::string& run_id, Deadline deadline) {
  return read_owned_records<PeerMetrics>(node, metrics_key(run_id), decode_metrics, deadline);
}

}  // namespace dedloc::collab
