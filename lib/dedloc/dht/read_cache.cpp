#include "dedloc/dht/read_cache.hpp"

#include <algorithm>

namespace dedloc::dht {

void ReadCache::drop_expired(Key& cached, double now) {
  std::erase_if(cached.entries, [&](const auto& entry) { return entry.second.expiration <= now; });
}

ReadCache::View ReadCache::begin(const crypto::PeerId& key, double now) {
  View view;
  auto it = keys_.find(key);
  if (it == keys_.end()) return view;
  Key& cached = it->second;
  cached.last_used = ++uses_;
  drop_expired(cached, now);
  for (const auto& [subkey, entry] : cached.entries) view.entries.push_back(entry);
  view.cursors = cached.cursors;
  return view;
}

void ReadCache::end(const crypto::PeerId& key, const std::vector<wire::RecordEntry>& entries,
                    const std::map<crypto::PeerId, StorageCursor>& cursors, double now) {
  if (max_keys_ == 0) return;
  auto it = keys_.find(key);
  if (it == keys_.end()) {
    if (keys_.size() >= max_keys_) {
      keys_.erase(std::min_element(keys_.begin(), keys_.end(), [](const auto& a, const auto& b) {
        return a.second.last_used < b.second.last_used;
      }));
    }
    it = keys_.emplace(key, Key{}).first;
  }
  Key& cached = it->second;
  cached.last_used = ++uses_;
  for (const auto& entry : entries) {
    if (entry.expiration <= now) continue;
    auto [slot, added] = cached.entries.try_emplace(entry.subkey, entry);
    if (!added && entry.expiration > slot->second.expiration) slot->second = entry;
    slot->second.signature.clear();  // checked when it came; a reader never sends it on
  }
  drop_expired(cached, now);
  for (const auto& [replica, cursor] : cursors) {
    auto [slot, added] = cached.cursors.try_emplace(replica, cursor);
    // Another instance: the replica was made anew, and only its latest cursor means anything there.
    if (!added && (slot->second.instance != cursor.instance || cursor.seq > slot->second.seq)) slot->second = cursor;
  }
  while (cached.cursors.size() > max_cursors_) {
    cached.cursors.erase(std::min_element(cached.cursors.begin(), cached.cursors.end(),
                                          [](const auto& a, const auto& b) { return a.second.seq < b.second.seq; }));
  }
}

}  // namespace dedloc::dht
