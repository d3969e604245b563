#include "dedloc/collab/progress.hpp"

#include <cmath>

#include "dedloc/dht/record.hpp"
#include "dedloc/dht/record_schema.hpp"
#include "dedloc/wire/map_codec.hpp"
#include "dedloc/wire/unpack.hpp"

namespace dedloc::collab {

std::string progress_key(const std::string& run_id) { return run_id + "_progress"; }
std::string metrics_key(const std::string& run_id) { return run_id + "_metrics"; }

std::string gradient_round(std::uint64_t epoch) { return "grad." + std::to_string(epoch); }

Bytes own_subkey(const dht::Node& node) {
  std::string marker = dht::owner_marker(node.public_key());
  return Bytes(marker.begin(), marker.end());
}

Bytes encode_progress(const PeerProgress& p) {
  wire::MapWriter value;
  value.put("epoch", p.epoch)
      .put("n", p.samples_accumulated)
      .put("sps", p.samples_per_second)
      .put("t", p.time)
      .put("client", p.client_mode)
      .put("bw", p.bandwidth)
      .put("flops", p.compute);
  return value.to_bytes();
}

Result<PeerProgress> decode_progress(ByteSpan value) {
  auto object = wire::unpack_bounded(value, wire::Limits{}, "progress record");
  if (!object) return object.status();
  auto reader = wire::MapReader::of((*object)->get(), "progress record");
  if (!reader) return reader.status();
  PeerProgress p;
  reader->get("epoch", p.epoch).get("n", p.samples_accumulated).get("sps", p.samples_per_second).get("t", p.time)
      .get_optional("client", p.client_mode).get_optional("bw", p.bandwidth).get_optional("flops", p.compute);
  DEDLOC_RETURN_IF_ERROR(reader->status());
  for (double x : {p.samples_per_second, p.time, p.bandwidth, p.compute}) {
    if (!std::isfinite(x) || x < 0) return error(Code::kMalformed, "progress record: a negative or non-finite number");
  }
  return p;
}

void add_progress_schema(dht::RecordValidator& validator) {
  using dht::FieldKind;
  validator.add_schema("_progress", dht::map_schema("progress record", {{"epoch", FieldKind::kCount},
                                                                         {"n", FieldKind::kCount},
                                                                         {"sps", FieldKind::kNumber, true, 0},
                                                                         {"t", FieldKind::kNumber, true, 0},
                                                                         {"client", FieldKind::kBool, false},
                                                                         {"bw", FieldKind::kNumber, false, 0},
                                                                         {"flops", FieldKind::kNumber, false, 0}}));
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

Bytes encode_metrics(const PeerMetrics& m) {
  wire::MapWriter value;
  value.put("epoch", m.epoch);
  if (m.loss && std::isfinite(*m.loss)) value.put("loss", *m.loss);
  value.put("sps", m.samples_per_second)
      .put("steps", m.micro_steps)
      .put("t", m.time)
      .put("role", m.role)
      .put("B", m.target_batch_size)
      .put("rounds", m.rounds);
  return value.to_bytes();
}

Result<PeerMetrics> decode_metrics(ByteSpan value) {
  auto object = wire::unpack_bounded(value, wire::Limits{}, "metrics record");
  if (!object) return object.status();
  auto reader = wire::MapReader::of((*object)->get(), "metrics record");
  if (!reader) return reader.status();
  PeerMetrics m;
  double loss = 0;
  bool has_loss = reader->find("loss") != nullptr;
  reader->get("epoch", m.epoch).get_optional("loss", loss).get("sps", m.samples_per_second).get("steps", m.micro_steps)
      .get("t", m.time).get_optional("role", m.role).get_optional("B", m.target_batch_size)
      .get_optional("rounds", m.rounds);
  DEDLOC_RETURN_IF_ERROR(reader->status());
  if (has_loss) {
    if (!std::isfinite(loss)) return error(Code::kMalformed, "metrics record: a non-finite loss");
    m.loss = loss;
  }
  if (!std::isfinite(m.samples_per_second) || m.samples_per_second < 0 || !std::isfinite(m.time) || m.time < 0) {
    return error(Code::kMalformed, "metrics record: a negative or non-finite rate or time");
  }
  if (m.role != "trainer" && m.role != "client" && m.role != "aux") {
    return error(Code::kMalformed, "metrics record: unknown role (trainer, client or aux)");
  }
  return m;
}

void add_metrics_schema(dht::RecordValidator& validator) {
  using dht::FieldKind;
  validator.add_schema("_metrics", dht::map_schema("metrics record", {{"epoch", FieldKind::kCount},
                                                                       {"loss", FieldKind::kNumber, false},
                                                                       {"sps", FieldKind::kNumber, true, 0},
                                                                       {"steps", FieldKind::kCount},
                                                                       {"t", FieldKind::kNumber, true, 0},
                                                                       {"role", FieldKind::kString, false},
                                                                       {"B", FieldKind::kCount, false},
                                                                       {"rounds", FieldKind::kCount, false}}));
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
