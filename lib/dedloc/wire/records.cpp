#include "dedloc/wire/records.hpp"

#include <algorithm>
#include <cmath>

#include "dedloc/wire/avg_messages.hpp"
#include "dedloc/wire/map_codec.hpp"
#include "dedloc/wire/unpack.hpp"

namespace dedloc::wire {

std::string owner_marker(const crypto::PublicKey& key) {
  return std::string(kOwnerMarkerOpen) + to_hex({key.data(), key.size()}) + "]";
}

// ---- Progress ----

std::string progress_key(std::string_view run_id) { return std::string(run_id) + "_progress"; }

Bytes encode_progress(const ProgressRecord& p) {
  MapWriter value;
  value.put("epoch", p.epoch)
      .put("n", p.samples_accumulated)
      .put("sps", p.samples_per_second)
      .put("t", p.time)
      .put("client", p.client_mode)
      .put("bw", p.bandwidth)
      .put("flops", p.compute);
  if (p.params_hash != 0) value.put("ph", p.params_hash);
  if (p.round_seconds > 0) value.put("rs", p.round_seconds).put("rm", p.round_mad_seconds);
  if (p.micro_batch > 0) value.put("mb", p.micro_batch);
  if (p.joined_at > 0) value.put("j", p.joined_at);
  return value.to_bytes();
}

Result<ProgressRecord> decode_progress(ByteSpan value) {
  auto object = unpack_bounded(value, Limits{}, "progress record");
  if (!object) return object.status();
  auto reader = MapReader::of((*object)->get(), "progress record");
  if (!reader) return reader.status();
  ProgressRecord p;
  reader->get("epoch", p.epoch).get("n", p.samples_accumulated).get("sps", p.samples_per_second).get("t", p.time)
      .get_optional("client", p.client_mode).get_optional("bw", p.bandwidth).get_optional("flops", p.compute)
      .get_optional("ph", p.params_hash).get_optional("rs", p.round_seconds).get_optional("rm", p.round_mad_seconds)
      .get_optional("mb", p.micro_batch).get_optional("j", p.joined_at);
  DEDLOC_RETURN_IF_ERROR(reader->status());
  for (double x : {p.samples_per_second, p.time, p.bandwidth, p.compute, p.round_seconds, p.round_mad_seconds}) {
    if (!std::isfinite(x) || x < 0) return error(Code::kMalformed, "progress record: a negative or non-finite number");
  }
  return p;
}

const RecordSchema& progress_schema() {
  static const RecordSchema schema{"_progress", "progress record", {{"epoch", FieldKind::kCount},
                                                                    {"n", FieldKind::kCount},
                                                                    {"sps", FieldKind::kNumber, true, 0},
                                                                    {"t", FieldKind::kNumber, true, 0},
                                                                    {"client", FieldKind::kBool, false},
                                                                    {"bw", FieldKind::kNumber, false, 0},
                                                                    {"flops", FieldKind::kNumber, false, 0},
                                                                    {"ph", FieldKind::kCount, false},
                                                                    {"rs", FieldKind::kNumber, false, 0},
                                                                    {"rm", FieldKind::kNumber, false, 0},
                                                                    {"mb", FieldKind::kCount, false},
                                                                    {"j", FieldKind::kCount, false}}};
  return schema;
}

// ---- Metrics ----

std::string metrics_key(std::string_view run_id) { return std::string(run_id) + "_metrics"; }

Bytes encode_metrics(const MetricsRecord& m) {
  MapWriter value;
  value.put("epoch", m.epoch);
  if (m.loss && std::isfinite(*m.loss)) value.put("loss", *m.loss);
  value.put("sps", m.samples_per_second)
      .put("steps", m.micro_steps)
      .put("t", m.time)
      .put("role", m.role)
      .put("B", m.target_batch_size)
      .put("rounds", m.rounds);
  if (!m.mode.empty()) value.put("mode", m.mode);
  if (m.inner_steps > 0) value.put("inner", m.inner_steps);
  if (m.bytes_sent > 0) value.put("sent", m.bytes_sent);
  if (m.samples_computed > 0) value.put("computed", m.samples_computed);
  return value.to_bytes();
}

Result<MetricsRecord> decode_metrics(ByteSpan value) {
  auto object = unpack_bounded(value, Limits{}, "metrics record");
  if (!object) return object.status();
  auto reader = MapReader::of((*object)->get(), "metrics record");
  if (!reader) return reader.status();
  MetricsRecord m;
  double loss = 0;
  bool has_loss = reader->find("loss") != nullptr;
  reader->get("epoch", m.epoch).get_optional("loss", loss).get("sps", m.samples_per_second).get("steps", m.micro_steps)
      .get("t", m.time).get_optional("role", m.role).get_optional("B", m.target_batch_size)
      .get_optional("rounds", m.rounds).get_optional("mode", m.mode).get_optional("inner", m.inner_steps)
      .get_optional("sent", m.bytes_sent).get_optional("computed", m.samples_computed);
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
  // Absent is "not said"; present, it is one of the modes (a newer mode is a change of the record).
  if (reader->find("mode") != nullptr && m.mode != "synchronous" && m.mode != "delayed" && m.mode != "diloco") {
    return error(Code::kMalformed, "metrics record: unknown mode (synchronous, delayed or diloco)");
  }
  return m;
}

const RecordSchema& metrics_schema() {
  static const RecordSchema schema{"_metrics", "metrics record", {{"epoch", FieldKind::kCount},
                                                                  {"loss", FieldKind::kNumber, false},
                                                                  {"sps", FieldKind::kNumber, true, 0},
                                                                  {"steps", FieldKind::kCount},
                                                                  {"t", FieldKind::kNumber, true, 0},
                                                                  {"role", FieldKind::kString, false},
                                                                  {"B", FieldKind::kCount, false},
                                                                  {"rounds", FieldKind::kCount, false},
                                                                  {"mode", FieldKind::kString, false},
                                                                  {"inner", FieldKind::kCount, false},
                                                                  {"sent", FieldKind::kCount, false},
                                                                  {"computed", FieldKind::kCount, false}}};
  return schema;
}

// ---- Donors ----

std::string donors_key(std::string_view run_id) { return std::string(run_id) + "_donors"; }

Bytes encode_donor(const DonorRecord& d) {
  MapWriter value;
  value.put("ep", std::string_view(d.endpoint))
      .put("epoch", d.epoch)
      .put("load", d.downloads)
      .put("max", d.max_downloads)
      .put("prio", d.priority)
      .put("t", d.refreshed);
  return value.to_bytes();
}

Result<DonorRecord> decode_donor(ByteSpan value) {
  auto handle = unpack_bounded(value, Limits{}, "donor record");
  if (!handle) return handle.status();
  auto reader = MapReader::of((*handle)->get(), "donor record");
  if (!reader) return reader.status();
  DonorRecord d;
  reader->get("ep", d.endpoint).get("epoch", d.epoch).get_optional("load", d.downloads)
      .get_optional("max", d.max_downloads).get_optional("prio", d.priority).get_optional("t", d.refreshed);
  DEDLOC_RETURN_IF_ERROR(reader->status());
  if (d.endpoint.empty()) return error(Code::kMalformed, "donor record: an empty endpoint");
  if (!std::isfinite(d.refreshed) || d.refreshed < 0) {
    return error(Code::kMalformed, "donor record: a negative or non-finite refresh time");
  }
  return d;
}

const RecordSchema& donor_schema() {
  static const RecordSchema schema{"_donors", "donor record", {{"ep", FieldKind::kString},
                                                              {"epoch", FieldKind::kCount},
                                                              {"load", FieldKind::kCount, false},
                                                              {"max", FieldKind::kCount, false},
                                                              {"prio", FieldKind::kNumber, false},
                                                              {"t", FieldKind::kNumber, false, 0}}};
  return schema;
}

// ---- The vector schema ----

std::string vector_schema_key(std::string_view run_id) { return std::string(run_id) + "_grad_schema"; }

Bytes encode_vector_schema(const VectorSchema& schema) {
  MapWriter value;
  value.put_binary("hash", schema.hash).put("len", schema.length);
  return value.to_bytes();
}

Result<VectorSchema> decode_vector_schema(ByteSpan value) {
  auto object = unpack_bounded(value, Limits{}, "the vector schema record");
  if (!object) return object.status();
  auto reader = MapReader::of((*object)->get(), "the vector schema record");
  if (!reader) return reader.status();
  VectorSchema schema;
  reader->get("hash", schema.hash).get("len", schema.length);
  DEDLOC_RETURN_IF_ERROR(reader->status());
  if (schema.hash.size() != kSchemaHashBytes) return error(Code::kMalformed, "bad schema hash");
  return schema;
}

// ---- Relay listings ----

Bytes encode_relay_listing(const RelayRecord& relay) {
  MapWriter value;
  value.put("addr", relay.address).put("peers", relay.peers).put("max", relay.max_peers);
  return value.to_bytes();
}

Result<RelayRecord> decode_relay_listing(ByteSpan value) {
  auto handle = unpack_bounded(value, Limits{}, "relay listing");
  if (!handle) return handle.status();
  auto reader = MapReader::of((*handle)->get(), "relay listing");
  if (!reader) return reader.status();
  RelayRecord relay;
  reader->get("addr", relay.address).get_optional("peers", relay.peers).get_optional("max", relay.max_peers);
  DEDLOC_RETURN_IF_ERROR(reader->status());
  return relay;
}

const RecordSchema& relay_schema() {
  static const RecordSchema schema{"_relays", "relay listing", {{"addr", FieldKind::kString},
                                                               {"peers", FieldKind::kCount, false},
                                                               {"max", FieldKind::kCount, false}}};
  return schema;
}

// ---- Round results ----

std::string round_result_key(std::string_view round) { return std::string(round) + "_held"; }

Bytes encode_round_result(const RoundResultRecord& record) {
  MapWriter value;
  value.put_binary("hash", record.schema_hash).put("len", record.length).put("n", record.contributions);
  return value.to_bytes();
}

Result<RoundResultRecord> decode_round_result(ByteSpan value) {
  auto handle = unpack_bounded(value, Limits{}, "round result record");
  if (!handle) return handle.status();
  auto reader = MapReader::of((*handle)->get(), "round result record");
  if (!reader) return reader.status();
  RoundResultRecord record;
  reader->get("hash", record.schema_hash).get("len", record.length).get("n", record.contributions);
  DEDLOC_RETURN_IF_ERROR(reader->status());
  if (record.schema_hash.size() != kSchemaHashBytes) {
    return error(Code::kMalformed, "round result record: bad schema hash");
  }
  if (record.contributions == 0) return error(Code::kMalformed, "round result record: no contribution");
  return record;
}

const RecordSchema& round_result_schema() {
  static const RecordSchema schema{"_held", "round result record", {{"hash", FieldKind::kBinary},
                                                                     {"len", FieldKind::kCount},
                                                                     {"n", FieldKind::kCount, true, 1}}};
  return schema;
}

// ---- Revocations ----

std::string revocation_key(const crypto::PublicKey& authority) {
  return "dedloc_revocations" + owner_marker(authority);
}

Bytes encode_revocations(const std::set<crypto::PublicKey>& revoked) {
  Bytes out;
  out.reserve(revoked.size() * crypto::kPublicKeySize);
  for (const auto& key : revoked) out.insert(out.end(), key.begin(), key.end());
  return out;
}

Result<std::set<crypto::PublicKey>> decode_revocations(ByteSpan value) {
  if (value.size() % crypto::kPublicKeySize != 0 || value.size() / crypto::kPublicKeySize > kMaxRevokedKeys) {
    return error(Code::kMalformed, "revocation list: " + std::to_string(value.size()) +
                                       " bytes is not a whole list of at most " + std::to_string(kMaxRevokedKeys) +
                                       " public keys");
  }
  std::set<crypto::PublicKey> revoked;
  for (size_t at = 0; at < value.size(); at += crypto::kPublicKeySize) {
    crypto::PublicKey key{};
    std::copy_n(value.begin() + static_cast<std::ptrdiff_t>(at), crypto::kPublicKeySize, key.begin());
    revoked.insert(key);
  }
  return revoked;
}

}  // namespace dedloc::wire
