#include "dedloc/train/progress.hpp"

#include <cmath>

#include "dedloc/dht/record.hpp"
#include "dedloc/dht/record_schema.hpp"
#include "dedloc/wire/map_codec.hpp"
#include "dedloc/wire/unpack.hpp"

namespace dedloc::train {

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

Status withdraw_progress(dht::Node& node, const std::string& run_id, Duration ttl, Deadline deadline) {
  double expiration = SystemClock::instance().unix_seconds() + std::chrono::duration<double>(ttl).count();
  return node.store(progress_key(run_id), own_subkey(node), Bytes{}, expiration, deadline).status();
}

Status publish_metrics(dht::Node& node, const std::string& run_id, const PeerMetrics& metrics, Duration ttl,
                       Deadline deadline) {
  const double now = SystemClock::instance().unix_seconds();
  wire::MapWriter value;
  value.put("epoch", metrics.epoch).put("loss", metrics.loss).put("sps", metrics.samples_per_second)
      .put("steps", metrics.micro_steps).put("t", now);
  return node.store(metrics_key(run_id), own_subkey(node), value.to_bytes(),
                    now + std::chrono::duration<double>(ttl).count(), deadline).status();
}

Result<std::vector<PeerProgress>> read_progress(dht::Node& node, const std::string& run_id, Deadline deadline) {
  auto found = node.get(progress_key(run_id), dht::GetMode::kLatest, deadline);
  if (!found) return found.status();
  std::vector<PeerProgress> peers;
  if (!found->has_value()) return peers;
  for (const auto& entry : (*found)->entries) {
    if (!entry.subkey || entry.value.empty()) continue;  // not a peer's entry, or a withdrawn one
    auto progress = decode_progress(entry.value);
    if (!progress) continue;  // the validator should have refused it; never trust a replica
    progress->peer.assign(entry.subkey->begin(), entry.subkey->end());
    peers.push_back(std::move(*progress));
  }
  return peers;
}

}  // namespace dedloc::train
