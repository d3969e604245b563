#include "dedloc/dht/storage.hpp"

#include <algorithm>
#include <random>

namespace dedloc::dht {

Storage::Storage(StorageLimits limits) : limits_(limits) {
  // Nonzero (0 is "no cursor"), and another one each time: a reader's cursor from a storage that was
  // made again (a node restarted) must not match.
  std::random_device random;
  do {
    instance_ = (static_cast<std::uint64_t>(random()) << 32) ^ random();
  } while (instance_ == 0);
}

double Record::expiration() const {
  double latest = value ? value->expiration : 0;
  for (const auto& [subkey, v] : subkeys) latest = std::max(latest, v.expiration);
  return latest;
}

Result<bool> Storage::store(const crypto::PeerId& key, const std::optional<Bytes>& subkey, StoredValue stored,
                            double now, std::string_view name) {
  const double expiration = stored.expiration;
  if (stored.value.size() > limits_.max_value_bytes) {
    return error(Code::kTooLarge, "value of " + std::to_string(stored.value.size()) +
                                      " bytes is over the limit of " + std::to_string(limits_.max_value_bytes));
  }
  if (expiration <= now) return error(Code::kRefused, "the value is already expired");
  auto it = records_.find(key);
  if (it != records_.end() && it->second.expiration() <= now) {
    records_.erase(it);  // an expired record never blocks a new one
    it = records_.end();
  }
  if (it == records_.end()) {
    if (records_.size() >= limits_.max_keys) {
      purge(now);
      if (records_.size() >= limits_.max_keys) return error(Code::kTooLarge, "this node's storage is full");
    }
    it = records_.emplace(key, Record{}).first;
  }
  Record& record = it->second;
  if (record.name.empty()) record.name = name;
  // An accepted store takes the next sequence number (a refused one none).
  auto accepted = [&] {
    stored.seq = ++seq_;
    return std::move(stored);
  };
  // The very entry held already (a request sent again after a lost datagram, a republish): nothing new,
  // and no refusal either.
  auto same = [&](const StoredValue& held) {
    return held.expiration == expiration && held.value == stored.value && held.signature == stored.signature;
  };
  if (!subkey) {
    if (record.value && same(*record.value)) return false;
    if (expiration <= record.expiration()) return error(Code::kRefused, "a value that expires later is stored");
    record.value = accepted();
    record.subkeys.clear();
    return true;
  }
  if (record.value) {  // a plain value: a dictionary replaces it only by outliving it
    if (expiration <= record.value->expiration) return error(Code::kRefused, "a value that expires later is stored");
    record.value.reset();
  }
  auto held = record.subkeys.find(*subkey);
  if (held != record.subkeys.end()) {
    if (same(held->second)) return false;
    if (held->second.expiration > now && expiration <= held->second.expiration) {
      return error(Code::kRefused, "a value that expires later is stored under this subkey");
    }
    held->second = accepted();
    return true;
  }
  if (record.subkeys.size() >= limits_.max_subkeys_per_key) {
    return error(Code::kTooLarge, "the key holds " + std::to_string(record.subkeys.size()) + " subkeys, the limit");
  }
  record.subkeys.emplace(*subkey, accepted());
  return true;
}

std::optional<Record> Storage::get(const crypto::PeerId& key, double now) const {
  auto it = records_.find(key);
  if (it == records_.end()) return std::nullopt;
  Record live;
  live.name = it->second.name;
  if (it->second.value && it->second.value->expiration > now) live.value = it->second.value;
  for (const auto& [subkey, v] : it->second.subkeys) {
    if (v.expiration > now) live.subkeys.emplace(subkey, v);
  }
  if (!live.value && live.subkeys.empty()) return std::nullopt;
  return live;
}

std::vector<crypto::PeerId> Storage::live_keys(double now) const {
  std::vector<crypto::PeerId> keys;
  for (const auto& [key, record] : records_) {
    if (record.expiration() > now) keys.push_back(key);
  }
  return keys;
}

void Storage::purge(double now) {
  for (auto it = records_.begin(); it != records_.end();) {
    Record& r = it->second;
    if (r.value && r.value->expiration <= now) r.value.reset();
    std::erase_if(r.subkeys, [&](const auto& entry) { return entry.second.expiration <= now; });
    it = (!r.value && r.subkeys.empty()) ? records_.erase(it) : std::next(it);
  }
}

}  // namespace dedloc::dht
