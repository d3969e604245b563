#include "dedloc/wire/avg_messages.hpp"

#include <cmath>
#include <limits>

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
}

Result<AvgJoin> AvgJoin::decode(MapReader in) {
  AvgJoin m;
  std::uint64_t role = 0;
  in.get("grp", m.group_key).get("schema", m.schema_hash).get_optional("ep", m.endpoint).get("role", role)
      .get("bw", m.bandwidth).get("until", m.wait_until).get_optional("n", m.members);
  DEDLOC_RETURN_IF_ERROR(in.status());
  auto r = role_from(role, kName);
  if (!r) return r.status();
  m.role = *r;
  if (m.group_key.empty() || m.group_key.size() > kMaxGroupKeyBytes) return malformed(kName, "group key of bad length");
  if (m.schema_hash.size() != kSchemaHashBytes) return malformed(kName, "a schema hash must have 32 bytes");
  if (m.endpoint.size() > 256) return malformed(kName, "endpoint too long");
  if (!std::isfinite(m.bandwidth) || m.bandwidth <= 0) return malformed(kName, "bandwidth must be a positive number");
  if (!std::isfinite(m.wait_until)) return malformed(kName, "'until' must be a finite time");
  if (m.members == 0 || m.members > kMaxGroupSize) return malformed(kName, "members out of range");
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
}

Result<AvgBegin> AvgBegin::decode(MapReader in) {
  AvgBegin m;
  std::vector<Bytes> raw_ids;
  std::vector<std::uint64_t> raw_roles;
  in.get("gid", m.group_id).get("ids", raw_ids).get("eps", m.endpoints).get("roles", raw_roles)
      .get("counts", m.counts).get("len", m.length).get("part", m.part_elements);
  DEDLOC_RETURN_IF_ERROR(in.status());
  DEDLOC_RETURN_IF_ERROR(check_group_id(m.group_id, kName));
  size_t n = raw_ids.size();
  if (n == 0 || n > kMaxGroupSize) return malformed(kName, "group size out of range");
  if (m.endpoints.size() != n || raw_roles.size() != n || m.counts.size() != n) {
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
void AvgPart::encode(MapWriter& out) const {
  out.put_binary("gid", group_id).put("idx", part).put("w", weight).put("codec", codec);
}

Result<AvgPart> AvgPart::decode(MapReader in) {
  AvgPart m;
  in.get("gid", m.group_id).get("idx", m.part).get("w", m.weight).get("codec", m.codec);
  DEDLOC_RETURN_IF_ERROR(in.status());
  DEDLOC_RETURN_IF_ERROR(check_group_id(m.group_id, kName));
  if (!std::isfinite(m.weight) || m.weight < 0) return malformed(kName, "weight must be a finite number >= 0");
  return m;
}

void AvgPartDelta::encode(MapWriter& out) const { out.put("idx", part).put("codec", codec).put("n", senders); }

Result<AvgPartDelta> AvgPartDelta::decode(MapReader in) {
  AvgPartDelta m;
  in.get("idx", m.part).get("codec", m.codec).get_optional("n", m.senders);
  DEDLOC_RETURN_IF_ERROR(in.status());
  return m;
}

}  // namespace dedloc::wire
