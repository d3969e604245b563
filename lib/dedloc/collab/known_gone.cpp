#include "dedloc/collab/known_gone.hpp"

#include <algorithm>

namespace dedloc::collab {

void KnownGone::add(const std::vector<crypto::PeerId>& gone, size_t others, TimePoint now) {
  for (const auto& id : gone) {
    if (std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.id == id; })) continue;
    entries_.push_back({id, others, now + record_ttl_});
  }
}

void KnownGone::seen(const std::vector<crypto::PeerId>& members) {
  std::erase_if(entries_, [&](const Entry& e) { return std::find(members.begin(), members.end(), e.id) != members.end(); });
}

size_t KnownGone::expected(size_t others, TimePoint now) {
  std::erase_if(entries_, [&](const Entry& e) { return now >= e.until || others < e.others_then; });
  return others + 1 - std::min(entries_.size(), others);
}

}  // namespace dedloc::collab
