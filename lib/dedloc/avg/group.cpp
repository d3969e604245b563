#include "dedloc/avg/group.hpp"

#include <algorithm>

#include "dedloc/crypto/hash.hpp"

namespace dedloc::avg {

std::uint64_t grid_part_elements(const std::vector<std::uint64_t>& counts, std::uint64_t configured) {
  std::uint64_t smallest = 0;
  for (auto count : counts) {
    if (count > 0 && (smallest == 0 || count < smallest)) smallest = count;
  }
  const std::uint64_t fine = (smallest + kMinPartsPerShare - 1) / kMinPartsPerShare;
  if (smallest == 0 || fine >= configured) return configured;
  return std::min(configured, std::max(fine, kMinGridPartElements));
}

Result<Group> Group::from_begin(wire::AvgBegin begin) {
  auto bad = [](const std::string& why) { return error(Code::kMalformed, "AvgBegin: " + why); };
  const size_t n = begin.ids.size();
  if (n == 0 || begin.endpoints.size() != n || begin.roles.size() != n || begin.counts.size() != n) {
    return bad("member arrays differ in length");
  }
  if (begin.part_elements == 0) return bad("part size must be positive");
  if (begin.relays.empty()) begin.relays.resize(n);
  if (begin.relays.size() != n) return bad("member arrays differ in length");
  std::uint64_t parts = 0, total = 0;
  for (size_t i = 0; i < n; ++i) {
    if (begin.counts[i] > begin.length) return bad("a member's count exceeds the vector");
    total += begin.counts[i];
    parts += (begin.counts[i] + begin.part_elements - 1) / begin.part_elements;
  }
  if (total != begin.length) return bad("counts do not sum to the vector length");
  if (parts > kMaxParts) return bad("more than " + std::to_string(kMaxParts) + " parts");

  Group group;
  std::uint64_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    Member member{begin.ids[i], begin.endpoints[i], begin.roles[i], begin.relays[i]};
    if (!member.reduces() && begin.counts[i] > 0) return bad("a client-mode member was given elements to reduce");
    if (begin.counts[i] > 0 && member.endpoint.empty()) return bad("a reducer without an endpoint");
    for (size_t j = 0; j < i; ++j) {
      if (group.members_[j].id == member.id) return bad("a member is listed twice");
    }
    if (member.sends()) group.senders_.push_back(i);
    group.members_.push_back(std::move(member));
    group.first_part_.push_back(group.parts_.size());
    for (std::uint64_t at = 0; at < begin.counts[i]; at += begin.part_elements) {
      Part part{group.parts_.size(), i, offset + at, offset + std::min(begin.counts[i], at + begin.part_elements)};
      group.largest_part_ = std::max(group.largest_part_, part.size());
      group.parts_.push_back(part);
    }
    offset += begin.counts[i];
  }
  group.first_part_.push_back(group.parts_.size());
  if (group.senders_.empty()) return bad("nobody in the group sends");
  group.begin_ = std::move(begin);
  return group;
}

Result<Group> Group::derived(std::string_view salt) const {
  wire::AvgBegin next;
  crypto::Hasher hasher;
  hasher.update(begin_.group_id);
  hasher.update({reinterpret_cast<const std::uint8_t*>(salt.data()), salt.size()});
  const auto digest = hasher.finish();
  next.group_id.assign(digest.begin(), digest.begin() + wire::kGroupIdBytes);
  next.length = begin_.length;
  next.part_elements = begin_.part_elements;
  size_t reducers = 0;
  for (size_t i = 0; i < members_.size(); ++i) {
    if (members_[i].role == AvgRole::kAux) continue;
    next.ids.push_back(members_[i].id);
    next.endpoints.push_back(members_[i].endpoint);
    next.roles.push_back(members_[i].role);
    next.relays.push_back(members_[i].relay);
    next.counts.push_back(0);
    reducers += members_[i].reduces() ? 1 : 0;
  }
  if (reducers == 0) return error(Code::kUnavailable, "no member of the group but aux peers can reduce");
  const std::uint64_t share = next.length / reducers, rest = next.length % reducers;
  size_t k = 0;
  for (size_t i = 0; i < next.ids.size(); ++i) {
    if (next.roles[i] == AvgRole::kClient) continue;
    next.counts[i] = share + (k++ < rest ? 1 : 0);
  }
  return from_begin(std::move(next));
}

std::optional<size_t> Group::index_of(const crypto::PeerId& id) const {
  for (size_t i = 0; i < members_.size(); ++i) {
    if (members_[i].id == id) return i;
  }
  return std::nullopt;
}

std::span<const Part> Group::parts_of(size_t reducer) const {
  return std::span<const Part>(parts_).subspan(first_part_.at(reducer), first_part_.at(reducer + 1) - first_part_.at(reducer));
}

}  // namespace dedloc::avg
