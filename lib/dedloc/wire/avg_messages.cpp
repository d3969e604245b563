#include "dedloc/wire/avg_messages.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace dedloc::wire {

namespace {

Status malformed(std::string_view message, const std::string& problem) {
  return error(Code::kMalformed, std::string(message) + ": " + problem);
}

Result<AvgRole> role_from(std::uint64_t value, std::string_view message) {
  if (value > static_cast<std::uint64_t>(AvgRole::kAux)) return malformed(message, "unknown role " + std::to_string(value));
  return static_cast<AvgRole>(value);
}

Status check_group_id(const Bytes& id, std::string_view message) {
  if (id.size() != kGroupIdBytes) return malformed(message, "a group id must have " + std::to_string(kGroupIdBytes) + " bytes");
  return {};
}

}  // namespace

// ---- AvgJoin ----
void AvgJoin::encode(MapWriter& out) const {
  out.put("grp", group_key)
      .put_binary("schema", schema_hash)
      .put("ep", endpoint)
      .put("role", static_cast<std::uint64_t>(role))
      .put("bw", bandwidth)
      .put("until", wait_until)
      .put("n", members);
  if (!relay.empty()) out.put("rly", relay);
  if (companions.empty()) return;  // the common case stays small
  std::vector<Bytes> ids;
  std::vector<std::string> endpoints, relays;
  std::vector<std::uint64_t> roles;
  std::vector<double> bandwidths;
  bool any_relay = false;
  for (const auto& c : companions) {
    ids.emplace_back(c.id.span().begin(), c.id.span().end());
    endpoints.push_back(c.endpoint);
    roles.push_back(static_cast<std::uint64_t>(c.role));
    bandwidths.push_back(c.bandwidth);
    relays.push_back(c.relay);
    any_relay = any_relay || !c.relay.empty();
  }
  out.put_binaries("cids", ids).put_strings("ceps", endpoints).put_uints("croles", roles).put_doubles("cbws", bandwidths);
  if (any_relay) out.put_strings("crlys", relays);
}

Result<AvgJoin> AvgJoin::decode(MapReader in) {
  AvgJoin m;
  std::uint64_t role = 0;
  std::vector<Bytes> companion_ids;
  std::vector<std::string> companion_endpoints;
  std::vector<std::uint64_t> companion_roles;
  std::vector<double> companion_bandwidths;
  std::vector<std::string> companion_relays;
  in.get("grp", m.group_key).get("schema", m.schema_hash).get_optional("ep", m.endpoint).get("role", role)
      .get("bw", m.bandwidth).get("until", m.wait_until).get_optional("n", m.members).get_optional("rly", m.relay)
      .get_optional("cids", companion_ids).get_optional("ceps", companion_endpoints)
      .get_optional("croles", companion_roles).get_optional("cbws", companion_bandwidths)
      .get_optional("crlys", companion_relays);
  DEDLOC_RETURN_IF_ERROR(in.status());
  auto r = role_from(role, kName);
  if (!r) return r.status();
  m.role = *r;
  if (m.group_key.empty() || m.group_key.size() > kMaxGroupKeyBytes) return malformed(kName, "group key of bad length");
  if (m.schema_hash.size() != kSchemaHashBytes) return malformed(kName, "a schema hash must have 32 bytes");
  if (m.endpoint.size() > 256) return malformed(kName, "endpoint too long");
  if (m.relay.size() > 256) return malformed(kName, "relay address too long");
  if (!std::isfinite(m.bandwidth) || m.bandwidth <= 0) return malformed(kName, "bandwidth must be a positive number");
  if (!std::isfinite(m.wait_until)) return malformed(kName, "'until' must be a finite time");
  if (m.members == 0 || m.members > kMaxGroupSize) return malformed(kName, "members out of range");
  const size_t n = companion_ids.size();
  if (companion_endpoints.size() != n || companion_roles.size() != n || companion_bandwidths.size() != n) {
    return malformed(kName, "companion arrays differ in length");
  }
  if (!companion_relays.empty() && companion_relays.size() != n) return malformed(kName, "companion arrays differ in length");
  companion_relays.resize(n);
  if (m.members != 1 + n) return malformed(kName, "'n' must count the joiner and its companions");
  for (size_t i = 0; i < n; ++i) {
    auto id = crypto::PeerId::from_bytes(companion_ids[i]);
    if (!id) return malformed(kName, "a companion id is not 20 bytes");
    auto companion_role = role_from(companion_roles[i], kName);
    if (!companion_role) return companion_role.status();
    if (companion_endpoints[i].size() > 256) return malformed(kName, "endpoint too long");
    if (companion_relays[i].size() > 256) return malformed(kName, "relay address too long");
    if (!std::isfinite(companion_bandwidths[i]) || companion_bandwidths[i] <= 0) {
      return malformed(kName, "a companion's bandwidth must be a positive number");
    }
    m.companions.push_back({*id, std::move(companion_endpoints[i]), *companion_role, companion_bandwidths[i],
                            std::move(companion_relays[i])});
  }
  return m;
}

// ---- AvgBegin ----
void AvgBegin::encode(MapWriter& out) const {
  std::vector<Bytes> raw_ids;
  std::vector<std::uint64_t> raw_roles;
  for (const auto& id : ids) raw_ids.emplace_back(id.span().begin(), id.span().end());
  for (auto role : roles) raw_roles.push_back(static_cast<std::uint64_t>(role));
  out.put_binary("gid", group_id)
      .put_binaries("ids", raw_ids)
      .put_strings("eps", endpoints)
      .put_uints("roles", raw_roles)
      .put_uints("counts", counts)
      .put("len", length)
      .put("part", part_elements);
  if (std::any_of(relays.begin(), relays.end(), [](const std::string& r) { return !r.empty(); })) out.put_strings("rlys", relays);
}

Result<AvgBegin> AvgBegin::decode(MapReader in) {
  AvgBegin m;
  std::vector<Bytes> raw_ids;
  std::vector<std::uint64_t> raw_roles;
  in.get("gid", m.group_id).get("ids", raw_ids).get("eps", m.endpoints).get("roles", raw_roles)
      .get("counts", m.counts).get("len", m.length).get("part", m.part_elements).get_optional("rlys", m.relays);
  DEDLOC_RETURN_IF_ERROR(in.status());
  DEDLOC_RETURN_IF_ERROR(check_group_id(m.group_id, kName));
  size_t n = raw_ids.size();
  if (n == 0 || n > kMaxGroupSize) return malformed(kName, "group size out of range");
  if (m.relays.empty()) m.relays.resize(n);
  if (m.endpoints.size() != n || raw_roles.size() != n || m.counts.size() != n || m.relays.size() != n) {
    return malformed(kName, "member arrays differ in length");
  }
  if (m.length > (std::uint64_t{1} << 48)) return malformed(kName, "vector length over the limit");
  std::uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    auto id = crypto::PeerId::from_bytes(raw_ids[i]);
    if (!id) return malformed(kName, "a member id is not 20 bytes");
    m.ids.push_back(*id);
    auto role = role_from(raw_roles[i], kName);
    if (!role) return role.status();
    m.roles.push_back(*role);
    if (m.endpoints[i].size() > 256) return malformed(kName, "endpoint too long");
    if (m.relays[i].size() > 256) return malformed(kName, "relay address too long");
    if (m.counts[i] > m.length) return malformed(kName, "a member's count exceeds the vector");
    total += m.counts[i];  // no overflow: at most 256 terms, each <= length <= 2^48
  }
  if (total != m.length) return malformed(kName, "counts do not sum to the vector length");
  if (m.part_elements == 0) return malformed(kName, "part size must be positive");
  return m;
}

// ---- AvgJoinRefused ----
void AvgJoinRefused::encode(MapWriter& out) const {
  out.put("why", static_cast<std::uint64_t>(reason)).put("msg", detail).put("leader", leader);
}

Result<AvgJoinRefused> AvgJoinRefused::decode(MapReader in) {
  AvgJoinRefused m;
  std::uint64_t why = 0;
  in.get("why", why).get_optional("msg", m.detail).get_optional("leader", m.leader);
  DEDLOC_RETURN_IF_ERROR(in.status());
  if (why < 1 || why > static_cast<std::uint64_t>(JoinRefusal::kBadRequest)) {
    why = static_cast<std::uint64_t>(JoinRefusal::kBadRequest);  // a newer peer's reason: still a refusal
  }
  m.reason = static_cast<JoinRefusal>(why);
  if (m.leader.size() > 512) return malformed(kName, "leader address too long");
  return m;
}

// ---- AvgPart / AvgPartDelta ----
namespace {

Status read_answer(std::uint64_t wire_value, PartAnswer& answer, std::string_view message) {
  if (wire_value > static_cast<std::uint64_t>(PartAnswer::kAverage)) {
    return malformed(message, "unknown answer kind " + std::to_string(wire_value));
  }
  answer = static_cast<PartAnswer>(wire_value);
  return {};
}

}  // namespace

void AvgPart::encode(MapWriter& out) const {
  out.put_binary("gid", group_id).put("idx", part).put("w", weight).put("codec", codec);
  if (answer != PartAnswer::kDelta) out.put("ans", static_cast<std::uint64_t>(answer));
  if (order != kNoOrder) out.put("o", order);
}

Result<AvgPart> AvgPart::decode(MapReader in) {
  AvgPart m;
  std::uint64_t answer = 0;
  in.get("gid", m.group_id).get("idx", m.part).get("w", m.weight).get("codec", m.codec).get_optional("ans", answer);
  in.get_optional("o", m.order);
  DEDLOC_RETURN_IF_ERROR(in.status());
  DEDLOC_RETURN_IF_ERROR(read_answer(answer, m.answer, kName));
  DEDLOC_RETURN_IF_ERROR(check_group_id(m.group_id, kName));
  if (!std::isfinite(m.weight) || m.weight < 0) return malformed(kName, "weight must be a finite number >= 0");
  return m;
}

void AvgPartDelta::encode(MapWriter& out) const {
  out.put("idx", part).put("codec", codec).put("n", senders);
  if (answer != PartAnswer::kDelta) out.put("ans", static_cast<std::uint64_t>(answer));
  if (weight > 0) out.put("w", weight);
}

Result<AvgPartDelta> AvgPartDelta::decode(MapReader in) {
  AvgPartDelta m;
  std::uint64_t answer = 0;
  in.get("idx", m.part).get("codec", m.codec).get_optional("n", m.senders).get_optional("ans", answer);
  in.get_optional("w", m.weight);
  DEDLOC_RETURN_IF_ERROR(in.status());
  DEDLOC_RETURN_IF_ERROR(read_answer(answer, m.answer, kName));
  if (!std::isfinite(m.weight) || m.weight < 0) return malformed(kName, "weight must be a finite number >= 0");
  return m;
}

// ---- State download ----

std::optional<std::uint64_t> StateTensor::elements() const {
  std::uint64_t n = 1;
  for (std::uint64_t d : shape) {
    if (d == 0) return 0;
    if (d > kMaxStateElements || n > kMaxStateElements / d) return std::nullopt;
    n *= d;
  }
  return n;
}

namespace {

Status check_stripe(std::uint64_t offset, std::uint64_t length, std::string_view message) {
  if (length > kMaxStatePartElements) {
    return malformed(message, "a stripe of " + std::to_string(length) + " elements is over the limit of " +
                                  std::to_string(kMaxStatePartElements));
  }
  if (offset > kMaxStateElements || length > kMaxStateElements - offset) return malformed(message, "stripe out of range");
  return {};
}

// "tensors": [{"name": str, "shape": [uint, ...]}, ...]
Bytes encode_tensors(const std::vector<StateTensor>& tensors) {
  msgpack::sbuffer out;
  msgpack::packer<msgpack::sbuffer> packer(&out);
  packer.pack_array(static_cast<std::uint32_t>(tensors.size()));
  for (const auto& t : tensors) {
    MapWriter entry;
    entry.put("name", std::string_view(t.name)).put_uints("shape", t.shape);
    entry.write_to(out);
  }
  return Bytes(out.data(), out.data() + out.size());
}

Result<std::vector<StateTensor>> decode_tensors(const msgpack::object& array, std::uint64_t total) {
  constexpr std::string_view kName = AvgStateReply::kName;
  if (array.type != msgpack::type::ARRAY) return malformed(kName, "'tensors' must be an array");
  if (array.via.array.size > kMaxStateTensors) return malformed(kName, "too many tensors");
  std::vector<StateTensor> tensors(array.via.array.size);
  std::set<std::string_view> names;
  std::uint64_t sum = 0;
  for (std::uint32_t i = 0; i < array.via.array.size; ++i) {
    auto reader = MapReader::of(array.via.array.ptr[i], "AvgStateReply tensor");
    if (!reader) return reader.status();
    StateTensor& t = tensors[i];
    reader->get("name", t.name).get("shape", t.shape);
    DEDLOC_RETURN_IF_ERROR(reader->status());
    if (t.name.empty() || t.name.size() > kMaxTensorNameBytes) return malformed(kName, "tensor name of bad length");
    if (t.shape.size() > kMaxTensorRank) return malformed(kName, "tensor '" + t.name + "' has too many dimensions");
    auto n = t.elements();
    if (!n || *n > total - sum) return malformed(kName, "tensor sizes exceed the total");
    sum += *n;
  }
  for (const auto& t : tensors) {
    if (!names.insert(t.name).second) return malformed(kName, "tensor '" + t.name + "' appears twice");
  }
  if (sum != total) return malformed(kName, "tensor sizes do not sum to the total");
  return tensors;
}

Result<StateEntries> decode_entries(const msgpack::object& map) {
  constexpr std::string_view kName = AvgStateReply::kName;
  if (map.type != msgpack::type::MAP) return malformed(kName, "'meta' must be a map");
  if (map.via.map.size > kMaxStateEntries) return malformed(kName, "too many metadata entries");
  StateEntries entries;
  for (std::uint32_t i = 0; i < map.via.map.size; ++i) {
    const auto& kv = map.via.map.ptr[i];
    if (kv.key.type != msgpack::type::STR) return malformed(kName, "a metadata key is not a string");
    std::string key(kv.key.via.str.ptr, kv.key.via.str.size);
    if (key.empty() || key.size() > kMaxStateEntryKeyBytes) return malformed(kName, "metadata key of bad length");
    StateValue value;
    switch (kv.val.type) {
      case msgpack::type::FLOAT32:
      case msgpack::type::FLOAT64: value = kv.val.via.f64; break;
      case msgpack::type::POSITIVE_INTEGER: value = static_cast<double>(kv.val.via.u64); break;
      case msgpack::type::NEGATIVE_INTEGER: value = static_cast<double>(kv.val.via.i64); break;
      case msgpack::type::STR:
        if (kv.val.via.str.size > kMaxStateEntryStringBytes) return malformed(kName, "metadata '" + key + "' too long");
        value = std::string(kv.val.via.str.ptr, kv.val.via.str.size);
        break;
      default: return malformed(kName, "metadata '" + key + "' must be a number or a string");
    }
    if (!entries.emplace(std::move(key), std::move(value)).second) return malformed(kName, "a metadata key appears twice");
  }
  return entries;
}

}  // namespace

// ---- AvgStateRequest ----
void AvgStateRequest::encode(MapWriter& out) const {
  out.put("key", std::string_view(key));
  if (epoch) out.put("epoch", *epoch);
  out.put("off", offset).put("len", length).put("codec", codec);
  if (describe) out.put("desc", true);
  if (done) out.put("done", true);
}

Result<AvgStateRequest> AvgStateRequest::decode(MapReader in) {
  AvgStateRequest m;
  in.get("key", m.key).get("off", m.offset).get("len", m.length).get("codec", m.codec)
      .get_optional("desc", m.describe).get_optional("done", m.done);
  if (in.find("epoch")) {
    std::uint64_t epoch = 0;
    in.get("epoch", epoch);
    m.epoch = epoch;
  }
  DEDLOC_RETURN_IF_ERROR(in.status());
  if (m.key.empty() || m.key.size() > kMaxStateKeyBytes) return malformed(kName, "state key of bad length");
  DEDLOC_RETURN_IF_ERROR(check_stripe(m.offset, m.length, kName));
  return m;
}

// ---- AvgStateReply ----
void AvgStateReply::encode(MapWriter& out) const {
  out.put("key", std::string_view(key))
      .put("epoch", epoch)
      .put_binary("schema", schema_hash)
      .put("total", total)
      .put("off", offset)
      .put("len", length)
      .put("codec", codec)
      .put("load", downloads);
  if (!described) return;
  out.put_encoded("tensors", encode_tensors(tensors));
  MapWriter meta;
  for (const auto& [k, v] : metadata) {
    if (const double* number = std::get_if<double>(&v)) meta.put(k, *number);
    else meta.put(k, std::string_view(std::get<std::string>(v)));
  }
  out.put_map("meta", meta);
}

Result<AvgStateReply> AvgStateReply::decode(MapReader in) {
  AvgStateReply m;
  in.get("key", m.key).get("epoch", m.epoch).get("schema", m.schema_hash).get("total", m.total)
      .get("off", m.offset).get("len", m.length).get("codec", m.codec).get_optional("load", m.downloads);
  DEDLOC_RETURN_IF_ERROR(in.status());
  if (m.key.empty() || m.key.size() > kMaxStateKeyBytes) return malformed(kName, "state key of bad length");
  if (m.schema_hash.size() != kSchemaHashBytes) return malformed(kName, "a schema hash must have 32 bytes");
  if (m.total > kMaxStateElements) return malformed(kName, "state size over the limit");
  DEDLOC_RETURN_IF_ERROR(check_stripe(m.offset, m.length, kName));
  if (m.offset + m.length > m.total) return malformed(kName, "the stripe ends past the state's last element");
  if (const msgpack::object* tensors = in.find("tensors")) {
    m.described = true;
    auto decoded = decode_tensors(*tensors, m.total);
    if (!decoded) return decoded.status();
    m.tensors = std::move(decoded.value());
    if (const msgpack::object* meta = in.find("meta")) {
      auto entries = decode_entries(*meta);
      if (!entries) return entries.status();
      m.metadata = std::move(entries.value());
    }
  }
  return m;
}

// ---- AvgResultRequest ----
void AvgResultRequest::encode(MapWriter& out) const {
  out.put("round", std::string_view(round)).put("off", offset).put("len", length);
}

Result<AvgResultRequest> AvgResultRequest::decode(MapReader in) {
  AvgResultRequest m;
  in.get("round", m.round).get("off", m.offset).get("len", m.length);
  DEDLOC_RETURN_IF_ERROR(in.status());
  if (m.round.empty() || m.round.size() > kMaxGroupKeyBytes) return malformed(kName, "round name of bad length");
  DEDLOC_RETURN_IF_ERROR(check_stripe(m.offset, m.length, kName));
  return m;
}

// ---- AvgResultReply ----
void AvgResultReply::encode(MapWriter& out) const {
  out.put("round", std::string_view(round))
      .put_binary("schema", schema_hash)
      .put("total", total)
      .put("n", contributions)
      .put("off", offset)
      .put("len", length);
}

Result<AvgResultReply> AvgResultReply::decode(MapReader in) {
  AvgResultReply m;
  in.get("round", m.round).get("schema", m.schema_hash).get("total", m.total).get("n", m.contributions)
      .get("off", m.offset).get("len", m.length);
  DEDLOC_RETURN_IF_ERROR(in.status());
  if (m.round.empty() || m.round.size() > kMaxGroupKeyBytes) return malformed(kName, "round name of bad length");
  if (m.schema_hash.size() != kSchemaHashBytes) return malformed(kName, "a schema hash must have 32 bytes");
  if (m.total > kMaxStateElements) return malformed(kName, "result size over the limit");
  if (m.contributions == 0) return malformed(kName, "a result of no contribution");
  DEDLOC_RETURN_IF_ERROR(check_stripe(m.offset, m.length, kName));
  if (m.offset + m.length > m.total) return malformed(kName, "the stripe ends past the result's last element");
  return m;
}

}  // namespace dedloc::wire
